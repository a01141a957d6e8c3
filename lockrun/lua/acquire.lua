-- acquire.lua: take a lock for one token, or say who holds it.
--
-- KEYS[1] the lock (a string: a JSON object with the token and holder metadata, with PX)
-- KEYS[2] the persistent fencing counter of that lock (no TTL)
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] node, ARGV[4] pid, ARGV[5] run id,
-- ARGV[6] the holder's wall clock in ms (reported as "since")
--
-- Returns {1, fence} when the lock is ours: taken now, or already held by this very
-- token (a retried acquire whose first reply was lost, go-redis #2985). fence is a
-- decimal string: Lua would print a large number as 1.7e+15.
-- Returns {0, value, pttl} when another token holds it: its stored value and the ms left.

-- Needed before Redis 5 to write after TIME; a no-op (or absent) since.
if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, h = pcall(cjson.decode, cur)
  if ok and type(h) == 'table' and h.token == ARGV[1] then
    return {1, h.fence}
  end
  return {0, cur, redis.call('PTTL', KEYS[1])}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- The larger of the stored counter + 1 and the server clock in microseconds, so that the
-- token keeps rising even when Redis restarted without its data.
local stored = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local fence = string.format('%.0f', math.max(stored + 1, now))
local nowS = string.format('%.0f', now)
redis.call('SET', KEYS[2], fence)

local v = cjson.encode({
  token = ARGV[1], fence = fence, node = ARGV[3], pid = tonumber(ARGV[4]) or 0,
  run_id = ARGV[5], since_ms = ARGV[6], acquired_us = nowS, renewed_us = nowS,
  ttl_ms = tonumber(ARGV[2]),
})
redis.call('SET', KEYS[1], v, 'PX', ARGV[2], 'NX')
return {1, fence}
