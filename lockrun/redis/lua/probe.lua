-- probe.lua: try, writing nothing, what cronlock needs of this server and of its ACL
-- user (cronlock config check).
--
-- KEYS[1] a key under the prefix, of a lock no job uses
-- ARGV[1] a channel under the prefix; ARGV[2] the database ('0' = no SELECT sent);
-- ARGV[3] '1' when runs send WAIT (--min-replicas); ARGV[4] '1' when they send
-- CLUSTER SLOTS (redis-cluster://); ARGV[5] the SHA1 of a script (for EVALSHA)
--
-- Returns {time, denied, memory}:
--   time    {seconds, microseconds} of TIME, or the error TIME gave as a string
--   denied  the commands the user may not run on that key and channel; {'?'} when the server
--           cannot tell (redis.acl_check_cmd came with Redis 7)
--   memory  INFO memory's text, or the error INFO gave as a string
local k, ch = KEYS[1], ARGV[1]
local t = redis.pcall('TIME')
if t.err then t = t.err end
local denied = {}
if redis.acl_check_cmd == nil then
  denied = {'?'}
else
  local cmds = {
    {'EVAL', 'return 1', '1', k}, {'EVALSHA', ARGV[5], '1', k},
    {'GET', k}, {'SET', k, 'v'}, {'DEL', k}, {'PEXPIRE', k, '1'}, {'PTTL', k}, {'TIME'},
    {'PUBLISH', ch, 'v'}, {'SCAN', '0'}, {'SUBSCRIBE', ch}, {'UNSUBSCRIBE', ch},
    {'INFO', 'memory'}, {'HSET', k, 'f', 'v'}, {'HSETNX', k, 'f', 'v'}, {'HGET', k, 'f'},
    {'HGETALL', k}, {'HMGET', k, 'f'}, {'HDEL', k, 'f'}, {'HEXISTS', k, 'f'},
    {'HINCRBY', k, 'f', '1'}, {'HKEYS', k}, {'ZADD', k, '1', 'm'}, {'ZCARD', k},
    {'ZRANGE', k, '0', '1'}, {'ZREM', k, 'm'}, {'LRANGE', k, '0', '1'},
  }
  if ARGV[2] ~= '0' then cmds[#cmds + 1] = {'SELECT', ARGV[2]} end
  if ARGV[3] == '1' then cmds[#cmds + 1] = {'WAIT', '1', '0'} end
  if ARGV[4] == '1' then cmds[#cmds + 1] = {'CLUSTER', 'SLOTS'} end
  for _, c in ipairs(cmds) do
    local ok, allowed = pcall(redis.acl_check_cmd, unpack(c))
    if ok and not allowed then
      denied[#denied + 1] = c[1]
    end
  end
end
local m = redis.pcall('INFO', 'memory')
if type(m) == 'table' then m = tostring(m.err) end
return {t, denied, m}
