-- acquire.lua: take a lock for one token, or say who holds it, or why it must not be taken.
--
-- KEYS[1] the lock (a string: a JSON object with the token and holder metadata, with PX)
-- KEYS[2] the persistent fencing counter of that lock (no TTL): a decimal integer
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] node, ARGV[4] pid, ARGV[5] run id,
-- ARGV[6] the holder's wall clock in ms (reported as "since"),
-- ARGV[7] '1' when the user allows a server that can evict keys (no INFO is read then)
--
-- Returns {1, fence, warn} when the lock is ours: taken now, or already held by this very
--   token (a retried acquire whose first reply was lost, go-redis #2985). fence is a
--   decimal string: Lua's numbers are doubles, exact only up to 2^53. warn is '' or the
--   error INFO gave (an ACL without +info): the eviction check could not run.
-- Returns {0, value, pttl} when another token holds it: its stored value and the ms left.
-- Returns {-1, 'evict', policy, maxmemory} when the server can evict the lock, and
--   {-1, 'fence', why, counter} when the counter cannot give a larger token that fits in
--   64 bits (why: 'garbage' or 'max'). Nothing is written in either case.

-- Needed before Redis 5 to write after TIME; a no-op (or absent) since.
if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, h = pcall(cjson.decode, cur)
  if ok and type(h) == 'table' and h.token == ARGV[1] then
    return {1, h.fence, ''}
  end
  return {0, cur, redis.call('PTTL', KEYS[1])}
end

-- An evicted lock is a lost lock: refuse a server with a maxmemory and any policy but
-- noeviction. INFO's memory section is read here, so the check costs no round trip
-- (CONFIG cannot run in a script); about 17us of server time. Plain find, then a match
-- anchored where it points: a pattern scanning the 1.4 KB text costs 20us more.
local warn = ''
if ARGV[7] ~= '1' then
  local info = redis.pcall('INFO', 'memory')
  if type(info) == 'table' then
    warn = tostring(info.err or 'INFO failed')
  else
    local p = string.find(info, '\nmaxmemory:', 1, true)
    local q = string.find(info, '\nmaxmemory_policy:', 1, true)
    local maxmem = p and string.match(info, '^%d+', p + 11) or '0'
    local policy = q and string.match(info, '^[%w%-]+', q + 18) or 'noeviction'
    if maxmem ~= '0' and policy ~= 'noeviction' then
      return {-1, 'evict', policy, maxmem}
    end
  end
end

-- The fencing token: the larger of the stored counter + 1 and the server clock in
-- microseconds, so that it keeps rising even when Redis restarted without its data.
-- Decimal strings throughout: a double would repeat tokens past 2^53.
local MAX = '18446744073709551615' -- 2^64 - 1, the largest token the job's uint64 holds
local function greater(a, b) -- a > b, both decimal strings without leading zeros
  if #a ~= #b then return #a > #b end
  return a > b
end
local function inc(s) -- s + 1
  local i = #s
  while i > 0 and string.sub(s, i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end

local t = redis.call('TIME')
local nowS = t[1] .. string.format('%06d', tonumber(t[2]))
local fence = nowS
local stored = redis.call('GET', KEYS[2])
if stored then
  if not string.match(stored, '^%d+$') then
    return {-1, 'fence', 'garbage', string.sub(stored, 1, 64)}
  end
  local n = inc(string.match(stored, '^0*(%d+)$')) -- leading zeros dropped
  if greater(n, MAX) then
    return {-1, 'fence', 'max', string.sub(stored, 1, 64)}
  end
  if greater(n, fence) then fence = n end
end
redis.call('SET', KEYS[2], fence)

local v = cjson.encode({
  token = ARGV[1], fence = fence, node = ARGV[3], pid = tonumber(ARGV[4]) or 0,
  run_id = ARGV[5], since_ms = ARGV[6], acquired_us = nowS, renewed_us = nowS,
  ttl_ms = tonumber(ARGV[2]),
})
redis.call('SET', KEYS[1], v, 'PX', ARGV[2], 'NX')
return {1, fence, warn}
