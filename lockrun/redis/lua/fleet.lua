-- fleet.lua: complete or add one entry of a key's ledger, for a run whose entry did not
-- travel with a release: error runs that hold no lock (refusals), a run whose output was
-- still on its way to a slow reader when the lock was let go, a completion retried after
-- its release's reply was lost.
--
-- KEYS[1] the tick record (read for its skip count), KEYS[2] the ledger's hash, KEYS[3]
-- its order, KEYS[4] its per-day counters (ledger.lua, which redis.go puts in front of
-- this script), KEYS[5] the lock (its holder's entry is never trimmed)
-- ARGV[1] the entry's JSON without its closing brace and without "a", "f", "k"
-- ARGV[2] how many entries to keep, ARGV[3] start in µs ('' = TIME now),
-- ARGV[4] end in µs ('' = TIME now), ARGV[5] the run id (its tick's skips are copied)
--
-- A run claimed by nothing (an error before any claim) that repeats an error of the same
-- node collapses into that node's entry: "c" counts the repeats, "l" is the last one's
-- time (a host whose clock is off refuses every minute; one entry says so).
--
-- Returns '' when the entry was written, else the error the server gave (a full server).

if redis.replicate_commands then redis.replicate_commands() end

local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
LK.ledger, LK.order, LK.days = KEYS[2], KEYS[3], KEYS[4]
local keep = tonumber(ARGV[2]) or 200

local skips = 0
local ok, r = pcall(cjson.decode, redis.call('GET', KEYS[1]) or '')
if ok and type(r) == 'table' and r.run_id == ARGV[5] then skips = tonumber(r.skips) or 0 end
local holder
local lv = redis.call('GET', KEYS[5])
if lv then
  local ok2, h = pcall(cjson.decode, lv)
  if ok2 and type(h) == 'table' then holder = h.run_id end
end

local ok3, p = pcall(cjson.decode, ARGV[1] .. '}')
if ok3 and type(p) == 'table' and p.s == 'error' and type(p.n) == 'string' and redis.pcall('HEXISTS', LK.ledger, ARGV[5]) == 0 then
  -- A repeat of this node's last error: count it in that entry.
  local cf = '~c:' .. p.n
  local id = redis.pcall('HGET', LK.ledger, cf)
  local e = type(id) == 'string' and redis.pcall('HGET', LK.ledger, id)
  if type(e) == 'string' then
    local ok4, d = pcall(cjson.decode, e)
    if ok4 and type(d) == 'table' and d.s == 'error' and d.n == p.n and
      string.gsub(tostring(d.e or ''), '%d', '') == string.gsub(tostring(p.e or ''), '%d', '') then
      e = string.gsub(e, ',"c":%d+', '')
      e = string.gsub(e, ',"l":%d+', '')
      e = string.gsub(e, ',"k":(%d+)}$', ',"c":' .. string.format('%d', (tonumber(d.c) or 1) + 1) .. ',"l":' .. now .. ',"k":%1}')
      local res = redis.pcall('HSET', LK.ledger, id, e)
      if type(res) == 'table' and res.err then return res.err end
      count(now, 'r', 1)
      count(now, 'f', 1)
      ledgerExpire()
      return ''
    end
  end
  local err = complete(ARGV[5], ARGV[1], ARGV[3], ARGV[4], skips, keep, holder, now)
  if err == '' then redis.pcall('HSET', LK.ledger, cf, ARGV[5]) end
  return err
end
return complete(ARGV[5], ARGV[1], ARGV[3], ARGV[4], skips, keep, holder, now)
