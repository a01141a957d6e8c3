-- checkpoint.lua: a key's checkpoints, fenced by the lock's token.
--
-- KEYS[1] the lock, KEYS[2] the newest checkpoint (hash: v value, m record, s scope,
-- us Redis time of the save), KEYS[3] the newest checkpoint of a succeeded run (same
-- fields); ARGV[1] the operation:
--
-- 'save' ARGV[2] token, ARGV[3] value, ARGV[4] record, ARGV[5] scope, ARGV[6] keep ms:
--   writes KEYS[2] only while the lock holds this token and is neither released nor
--   revoked. Returns {1, us} when written, {0} when the lock is not the caller's.
-- 'mark' ARGV[2] token, ARGV[3] scope, ARGV[4] keep ms: copies KEYS[2] to KEYS[3] when
--   its scope is ARGV[3], fenced the same way. Returns 1 when copied, 2 when there was
--   nothing of that scope, 0 when the lock is not the caller's.
-- 'read': returns {v, m, us, s, okv, okm, okus} (false for what is missing).
-- 'reset' ARGV[2] '1' to delete while the lock is held: returns {n} the records deleted,
--   or {-1, lock value} when the lock is held and ARGV[2] is not '1'.

if redis.replicate_commands then redis.replicate_commands() end

local op = ARGV[1]

local function ours(token)
  local cur = redis.call('GET', KEYS[1])
  if not cur then return false end
  local ok, h = pcall(cjson.decode, cur)
  return ok and type(h) == 'table' and h.token == token and not h.released_us and not h.revoked_us
end

if op == 'save' then
  if not ours(ARGV[2]) then return {0} end
  local t = redis.call('TIME')
  local us = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'v', ARGV[3], 'm', ARGV[4], 's', ARGV[5], 'us', us)
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  return {1, us}
elseif op == 'mark' then
  if not ours(ARGV[2]) then return 0 end
  local c = redis.call('HMGET', KEYS[2], 'v', 'm', 's', 'us')
  if not c[1] or c[3] ~= ARGV[3] then return 2 end
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'v', c[1], 'm', c[2], 's', c[3], 'us', c[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  return 1
elseif op == 'read' then
  local c = redis.call('HMGET', KEYS[2], 'v', 'm', 'us', 's')
  local k = redis.call('HMGET', KEYS[3], 'v', 'm', 'us')
  return {c[1], c[2], c[3], c[4], k[1], k[2], k[3]}
elseif op == 'reset' then
  local cur = redis.call('GET', KEYS[1])
  if cur and ARGV[2] ~= '1' then
    local ok, h = pcall(cjson.decode, cur)
    if not (ok and type(h) == 'table' and h.released_us) then return {-1, cur} end
  end
  return {redis.call('DEL', KEYS[2], KEYS[3])}
end
return redis.error_reply('checkpoint.lua: unknown operation ' .. tostring(op))
