-- unlock.lua: force-release a lock whatever its token, reading and deleting in one step.
--
-- KEYS[1] the lock, ARGV[1] '1' to remove a live lock too, ARGV[2] the release channel
--
-- Returns {0} when no lock is there;
-- {-1, value, pttl} when it refuses: the holder confirmed the lock within its TTL (by
--   acquiring or renewing it, on the Redis clock) and has not released it, and ARGV[1] is
--   not '1'; a value that is not cronlock's is refused too;
-- {1, value, pttl} when it deleted the lock (and announced it on the channel).

if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('GET', KEYS[1])
if not cur then return {0} end
local pttl = redis.call('PTTL', KEYS[1])

if ARGV[1] ~= '1' then
  local ok, h = pcall(cjson.decode, cur)
  if not ok or type(h) ~= 'table' then return {-1, cur, pttl} end
  if not h.released_us then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local renewed = tonumber(h.renewed_us) or now
    if now - renewed < (tonumber(h.ttl_ms) or 0) * 1000 then return {-1, cur, pttl} end
  end
end

redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ARGV[2], 'released')
return {1, cur, pttl}
