-- release.lua: let a lock go, only if it holds our token, honouring a minimum hold time,
-- and complete the run's entry in the fleet's ledger.
--
-- KEYS[1] the lock, ARGV[1] token, ARGV[2] min hold in ms (0 = none),
-- ARGV[3] the release channel
-- KEYS[2] the tick record and ARGV[4] a run id, when the run's job never started: a tick
--   claimed by that run is given back (its tick_us restored to prev_us), lock or no lock.
--   ARGV[4] is '' to give nothing back (KEYS[2] is then read for its skip count only).
-- KEYS[3] the ledger's hash, KEYS[4] its order, KEYS[5] its per-day counters (ledger.lua,
--   which redis.go puts in front of this script)
-- ARGV[5] the run's completed entry, Go-encoded without its closing brace and without
--   "a", "f", "k" ('' = none), ARGV[6] how many entries to keep, ARGV[7] the run's start
--   (Redis TIME at acquire, µs: used only if its claim's entry is missing), ARGV[8] its
--   run id (the skips of its tick are copied into the entry)
-- ARGV[9] how many earlier runs of this host are completed too (their own completion
--   failed: lockrun.Pending), then 4 items for each: run id, entry (as ARGV[5]), start µs,
--   end µs (this host's clock when the run ended, or '' = now)
-- ARGV[10 + 4 * that count] when the release was sent, µs on the Redis clock as measured
--   from the acquire ('' = unknown): the run's end when its lock is gone (a late release
--   must not stretch the run over the next holder's)
-- The entry is completed whatever became of the lock (a lost lock's run ran too), after
-- the lock is deleted, and with pcall: a write the server refuses never keeps the lock.
--
-- Returns {1, 0, now, err} when the lock was deleted (and announced on the channel),
-- {2, ms, now, err} when it is kept for the ms left of the min hold (measured on the Redis
-- clock, the clock that also counts the PX), {0, 0, now, err} when the lock is missing or
-- not ours (lost). now is the server's TIME in µs (a decimal string), the run's end; err is
-- '' or why the entry could not be written.

if redis.replicate_commands then redis.replicate_commands() end

local t = redis.call('TIME')
local nowS = t[1] .. string.format('%06d', tonumber(t[2]))
LK.ledger, LK.order, LK.days = KEYS[3], KEYS[4], KEYS[5]

-- Read before a give-back clears the claim's run id.
local skips = 0
local entry = ARGV[5] or ''
if entry ~= '' then
  local ok, r = pcall(cjson.decode, redis.call('GET', KEYS[2]) or '')
  if ok and type(r) == 'table' and r.run_id == ARGV[8] then skips = tonumber(r.skips) or 0 end
end
local function record(code, ms)
  local keep = tonumber(ARGV[6]) or 200
  local err = ''
  local n = tonumber(ARGV[9]) or 0
  if entry ~= '' then
    local endUs = ''
    local sent = tonumber(ARGV[10 + 4 * n] or '')
    if code == 0 and sent and sent < tonumber(nowS) then endUs = ARGV[10 + 4 * n] end
    err = complete(ARGV[8], entry, ARGV[7], endUs, skips, keep, nil, nowS)
  end
  for i = 0, n - 1 do
    local b = 10 + 4 * i
    if ARGV[b + 3] then complete(ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], 0, keep, nil, nowS) end
  end
  return {code, ms, nowS, err}
end

if KEYS[2] and ARGV[4] and ARGV[4] ~= '' then
  local raw = redis.call('GET', KEYS[2])
  local ok, r = pcall(cjson.decode, raw or '')
  if ok and type(r) == 'table' and r.run_id == ARGV[4] then
    if type(r.prev_us) == 'string' and r.prev_us ~= '' then
      r.tick_us, r.prev_us, r.given_back, r.run_id, r.node = r.prev_us, '', ARGV[4], '', ''
      r.pending_until = nil
      redis.call('SET', KEYS[2], cjson.encode(r), 'KEEPTTL', 'XX')
    else
      redis.call('DEL', KEYS[2])
    end
  end
elseif KEYS[2] and (ARGV[8] or '') ~= '' then
  -- The run's tick claim was not given back: a pending one (--min-replicas) is confirmed.
  local raw = redis.call('GET', KEYS[2])
  if raw and string.find(raw, '"pending_until"', 1, true) then
    local ok, r = pcall(cjson.decode, raw)
    if ok and type(r) == 'table' and r.run_id == ARGV[8] then
      r.pending_until = nil
      redis.pcall('SET', KEYS[2], cjson.encode(r), 'KEEPTTL', 'XX')
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
