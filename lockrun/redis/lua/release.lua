-- release.lua: let a lock go, only if it holds our token, honouring a minimum hold time.
--
-- KEYS[1] the lock, ARGV[1] token, ARGV[2] min hold in ms (0 = none),
-- ARGV[3] the release channel
-- KEYS[2] the tick record and ARGV[4] a run id, when the run's job never started: a tick
--   claimed by that run is given back (its tick_us restored to prev_us), lock or no lock.
--   ARGV[4] is '' to give nothing back (KEYS[2] is then read for its skip count only).
-- KEYS[3] the fleet's record (a list, newest first), with ARGV[5] the run's entry as JSON
--   without its closing brace and without "a", "f", "k" ('' = none), ARGV[6] how many
--   entries to keep, ARGV[7] the run's start (Redis TIME at acquire, µs), ARGV[8] its run
--   id (the skips of its tick are copied into the entry). The entry is written whatever
--   became of the lock (a lost lock's run ran too), after the lock is deleted, and with
--   pcall: a write the server refuses must never keep the lock.
--
-- Returns {1, 0, now, err} when the lock was deleted (and announced on the channel),
-- {2, ms, now, err} when it is kept for the ms left of the min hold (measured on the Redis
-- clock, the clock that also counts the PX), {0, 0, now, err} when the lock is missing or
-- not ours (lost). now is the server's TIME in µs (a decimal string), the run's end; err is
-- '' or why the entry could not be written.

if redis.replicate_commands then redis.replicate_commands() end

local t = redis.call('TIME')
local nowS = t[1] .. string.format('%06d', tonumber(t[2]))

-- Read before a give-back clears the claim's run id.
local skips = 0
local entry = ARGV[5] or ''
if entry ~= '' then
  local ok, r = pcall(cjson.decode, redis.call('GET', KEYS[2]) or '')
  if ok and type(r) == 'table' and r.run_id == ARGV[8] then skips = tonumber(r.skips) or 0 end
end
-- A release whose reply was lost is sent again: its entry is then there already (same
-- run id and fields; only "f", the time, differs) and must not be counted twice.
local function recorded(list, e)
  local head = redis.pcall('LRANGE', list, 0, 9)
  if type(head) ~= 'table' then return false end
  for _, x in ipairs(head) do
    if string.sub(x, 1, #e) == e then return true end
  end
  return false
end
local function record(code, ms)
  if entry == '' then return {code, ms, nowS, ''} end
  if recorded(KEYS[3], entry) then return {code, ms, nowS, ''} end
  local e = entry .. ',"a":' .. ARGV[7] .. ',"f":' .. nowS .. ',"k":' .. string.format('%d', skips) .. '}'
  local res = redis.pcall('LPUSH', KEYS[3], e)
  if type(res) == 'table' and res.err then return {code, ms, nowS, res.err} end
  redis.pcall('LTRIM', KEYS[3], 0, (tonumber(ARGV[6]) or 200) - 1)
  redis.pcall('PEXPIRE', KEYS[3], 34560000000)
  return {code, ms, nowS, ''}
end

if KEYS[2] and ARGV[4] and ARGV[4] ~= '' then
  local raw = redis.call('GET', KEYS[2])
  local ok, r = pcall(cjson.decode, raw or '')
  if ok and type(r) == 'table' and r.run_id == ARGV[4] then
    if type(r.prev_us) == 'string' and r.prev_us ~= '' then
      r.tick_us, r.prev_us, r.given_back, r.run_id, r.node = r.prev_us, '', ARGV[4], '', ''
      redis.call('SET', KEYS[2], cjson.encode(r), 'KEEPTTL', 'XX')
    else
      redis.call('DEL', KEYS[2])
    end
  end
end

local cur = redis.call('GET', KEYS[1])
if not cur then return record(0, 0) end
local ok, h = pcall(cjson.decode, cur)
if not ok or type(h) ~= 'table' or h.token ~= ARGV[1] then return record(0, 0) end

local minHold = tonumber(ARGV[2]) or 0
if minHold > 0 then
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local left = math.ceil(minHold - (now - (tonumber(h.acquired_us) or now)) / 1000)
  if left > 0 then
    -- PEXPIRE first, as in renew.lua: a full server (noeviction) refuses SET, not PEXPIRE.
    redis.call('PEXPIRE', KEYS[1], string.format('%.0f', left))
    h.released_us = string.format('%.0f', now)
    redis.pcall('SET', KEYS[1], cjson.encode(h), 'KEEPTTL', 'XX')
    return record(2, left)
  end
end

redis.call('DEL', KEYS[1])
-- redis.pcall: an ACL without rights on the channel makes PUBLISH fail, never the release.
redis.pcall('PUBLISH', ARGV[3], 'released')
return record(1, 0)
