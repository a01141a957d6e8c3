-- suspend.lua: a key's suspension (cronlock suspend, resume, and its readers).
--
-- KEYS[1] the suspension (a JSON string: lockrun's EncodeSuspension)
-- KEYS[2] with 'del': the key's tick record, whose held_us the resume moves to now
-- ARGV[1] 'set', 'del' or 'get'
-- ARGV[2] with 'set': the value; ARGV[3] its until in µs ('' = none: no expiry)
--
-- A suspension whose until has passed on this server's clock is gone (its PX ends at that
-- instant; the check covers a value written without one).
-- Returns {1, value} with 'get' and 'del' when the key was suspended (del removed it),
--   {0, ''} when it was not; {1, ''} with 'set'.
-- Returns {-1, 'past'} with 'set' when the until has passed on this server's clock.

if redis.replicate_commands then redis.replicate_commands() end

local t = redis.call('TIME')
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function live(v)
  if not v then return false end
  local ok, s = pcall(cjson.decode, v)
  if ok and type(s) == 'table' and type(s.until_us) == 'string' and string.match(s.until_us, '^%d+$') then
    return tonumber(s.until_us) > nowUs
  end
  return true
end

if ARGV[1] == 'set' then
  if ARGV[3] ~= '' then
    -- PX, not PXAT (Redis 6.2): the time left on this server's clock, rounded up.
    local left = math.ceil((tonumber(ARGV[3]) - nowUs) / 1000)
    if left <= 0 then return {-1, 'past'} end
    redis.call('SET', KEYS[1], ARGV[2], 'PX', string.format('%d', left))
  else
    redis.call('SET', KEYS[1], ARGV[2])
  end
  return {1, ''}
end
local v = redis.call('GET', KEYS[1])
if not live(v) then return {0, ''} end
if ARGV[1] == 'del' then
  redis.call('DEL', KEYS[1])
  -- No tick was due while the key was suspended: noted as fired-but-held up to now (as
  -- acquire.lua does), the claim after the resume does not call them never fired, even
  -- if no host's cron fired meanwhile.
  local raw = KEYS[2] and redis.call('GET', KEYS[2])
  local ok, r = pcall(cjson.decode, raw or '')
  if ok and type(r) == 'table' and not (type(r.held_us) == 'string' and (tonumber(r.held_us) or 0) >= nowUs) then
    r.held_us = string.format('%.0f', nowUs)
    redis.pcall('SET', KEYS[2], cjson.encode(r), 'KEEPTTL', 'XX')
  end
end
return {1, v}
