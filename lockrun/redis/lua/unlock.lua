-- unlock.lua: force-release a lock whatever its token, reading and deleting in one step.
--
-- KEYS[1] the lock, ARGV[1] '1' to remove a live lock too, ARGV[2] the release channel
--
-- Returns {0} when no lock is there;
-- {-1, value, pttl} when it refuses: the holder confirmed the lock within its TTL (by
--   acquiring or renewing it, on the Redis clock) and has not released it, and ARGV[1] is
--   not '1'; a value that is not cronlock's is refused too;
-- {1, value, pttl} when it deleted the lock (and announced it on the channel);
-- {2, value, pttl} when ARGV[1] is '1' and the holder is live: the lock is marked revoked
--   (revoked_us) and kept until its lease ends. Deleting it would let a waiter start at once
--   beside a job that runs on until its holder's next renewal (ttl/3, plus the grace); a
--   revoked lock fails that renewal, so the job is stopped before the key expires.

if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('GET', KEYS[1])
if not cur then return {0} end
local pttl = redis.call('PTTL', KEYS[1])

local ok, h = pcall(cjson.decode, cur)
if ARGV[1] ~= '1' and (not ok or type(h) ~= 'table') then return {-1, cur, pttl} end
if ok and type(h) == 'table' and not h.released_us then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local renewed = tonumber(h.renewed_us) or now
  if now - renewed < (tonumber(h.ttl_ms) or 0) * 1000 then
    if ARGV[1] ~= '1' then return {-1, cur, pttl} end
    -- A key without expiry (PERSIST by hand) would never free itself: deleted instead.
    if pttl > 0 then
      if not h.revoked_us then
        h.revoked_us = string.format('%.0f', now)
        redis.call('SET', KEYS[1], cjson.encode(h), 'PX', pttl, 'XX')
      end
      return {2, cur, pttl}
    end
  end
end

redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ARGV[2], 'released')
return {1, cur, pttl}
