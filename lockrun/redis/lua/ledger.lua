-- ledger.lua: the fleet's ledger (README, "The fleet's record"), shared by acquire.lua, release.lua and
-- fleet.lua: redis.go puts this text in front of each of them. Before calling, a script
-- sets LK: LK.ledger (hash: run id -> entry, lockrun.FleetEntry's JSON; plus "~ls" and
-- "~lf", the ids of the key's last success and last failure, and "~c:<node>", the entry
-- that a node's repeated errors collapse into), LK.order (sorted set: run id by claim
-- time, TIME µs) and LK.days (hash of per-day counters: field = days since 1970 on TIME,
-- value "r,s,f,i,m,n,d": r claims, s succeeded, f failures of completed runs, i
-- interrupted, m missed, n never fired ticks, d duplicates).
--
-- Entries are written by hand: cjson prints numbers with 14 digits, and a µs time has 16.
-- Every write is a pcall: a write the server refuses (a full server, an ACL without hash
-- rights) must never keep a lock or turn a claim into an error; its error is returned.
-- An entry always ends with ,"k":<skips>} so that a skip can be counted in place.

local LK = {}
local LTTL = 34560000000 -- 400 days after the last claim: a retired job must not fill a noeviction server
local NUM = {t=1, x=1, d=1, r=1, fe=1, a=1, f=1, k=1, at=1, nf=1, nt=1, nc=1, c=1, l=1, g=1}
local FAIL = {failed=1, timeout=1, lock_lost=1, error=1, abandoned=1}

local function jv(k, v)
  if type(v) == 'boolean' then return v and 'true' or 'false' end
  if type(v) == 'number' then return string.format('%.0f', v) end
  v = tostring(v)
  if NUM[k] and string.match(v, '^%-?%d+$') then return v end
  return cjson.encode(v)
end

-- fields is ,"name":value for each field of m, in name order.
local function fields(m)
  local ks = {}
  for k in pairs(m) do ks[#ks + 1] = k end
  table.sort(ks)
  local s = ''
  for _, k in ipairs(ks) do s = s .. ',' .. cjson.encode(k) .. ':' .. jv(k, m[k]) end
  return s
end

local DAY = 86400000000
local COUNTER = {r=1, s=2, f=3, i=4, m=5, n=6, d=7}
-- count adds n to counter c of the day of us: one field per day, "r,s,f,i,m,n,d" (a
-- field per counter would take three times the memory over 400 days).
local function count(us, c, n)
  local day = string.format('%d', math.floor(tonumber(us) / DAY))
  local v = redis.pcall('HGET', LK.days, day)
  local t = {0, 0, 0, 0, 0, 0, 0}
  if type(v) == 'string' then
    local i = 1
    for x in string.gmatch(v, '%d+') do
      if i > 7 then break end
      t[i] = tonumber(x)
      i = i + 1
    end
  end
  t[COUNTER[c]] = t[COUNTER[c]] + n
  for i = 1, 7 do t[i] = string.format('%d', t[i]) end
  redis.pcall('HSET', LK.days, day, table.concat(t, ','))
  if type(v) ~= 'string' then
    -- A new day: the days older than 400 go (once a day, one HKEYS).
    local ks = redis.pcall('HKEYS', LK.days)
    if type(ks) == 'table' then
      for _, f in ipairs(ks) do
        local d = tonumber(f)
        if d and d < tonumber(day) - 400 then redis.pcall('HDEL', LK.days, f) end
      end
    end
  end
end

-- trim drops the oldest entries beyond keep: whole entries, oldest first, never the
-- key's last success or last failure, never the entry of holder (the run that holds the
-- lock: a running entry whose lock is gone is abandoned, and may go) nor fresh (the entry
-- just written).
local function trim(keep, holder, fresh)
  local n = redis.pcall('ZCARD', LK.order)
  if type(n) ~= 'number' or n <= keep then return end
  local protect = {}
  local m = redis.pcall('HMGET', LK.ledger, '~ls', '~lf')
  if type(m) == 'table' then
    for _, id in ipairs(m) do if id then protect[id] = true end end
  end
  if holder then protect[holder] = true end
  if fresh then protect[fresh] = true end
  local old = redis.pcall('ZRANGE', LK.order, 0, n - keep + 2)
  if type(old) ~= 'table' then return end
  for _, id in ipairs(old) do
    if n <= keep then break end
    if not protect[id] then
      redis.pcall('HDEL', LK.ledger, id)
      redis.pcall('ZREM', LK.order, id)
      n = n - 1
    end
  end
end

local function ledgerExpire()
  redis.pcall('PEXPIRE', LK.ledger, LTTL)
  redis.pcall('PEXPIRE', LK.order, LTTL)
  redis.pcall('PEXPIRE', LK.days, LTTL)
end

-- addEntry writes a new entry e of run id, claimed at aUs. Returns '' or the server's
-- error, and whether it was added: a run id already there (a retried claim whose first
-- reply was lost) is left as it is. notRun: the entry is not a claim of a run (ticks
-- never fired), so the day's claims are not counted.
local function addEntry(id, e, aUs, keep, holder, notRun)
  local res = redis.pcall('HSETNX', LK.ledger, id, e)
  if type(res) == 'table' and res.err then return res.err, false end
  if res == 0 then return '', false end
  redis.pcall('ZADD', LK.order, aUs, id)
  if not notRun then count(aUs, 'r', 1) end
  trim(keep, holder, id)
  ledgerExpire()
  return '', true
end

-- finalCount counts a completed entry of status st claimed at aUs, and remembers the
-- key's last success or failure.
local function finalCount(id, st, aUs)
  if st == 'succeeded' then
    count(aUs, 's', 1)
    redis.pcall('HSET', LK.ledger, '~ls', id)
  elseif FAIL[st] then
    count(aUs, 'f', 1)
    redis.pcall('HSET', LK.ledger, '~lf', id)
  elseif st == 'interrupted' then
    count(aUs, 'i', 1)
  elseif st == 'missed' then
    count(aUs, 'm', 1)
  end
end

-- complete completes the entry of run id with prefix (Go-encoded, without its closing
-- brace, "a", "f", "k"): what only the claim knew (its time, the tick logic's marks, the
-- skips) is kept. An entry already completed is left as it is (a repeated release whose
-- first reply was lost, or a late completion of a run another path completed); a missing
-- one (its claim's write failed, or a failover lost it) is added. startUs and endUs are
-- the run's times ('' = now), skips the tick record's count for this run.
local function complete(id, prefix, startUs, endUs, skips, keep, holder, now)
  local old = redis.pcall('HGET', LK.ledger, id)
  if type(old) == 'table' and old.err then return old.err end
  local t = {}
  if type(old) == 'string' then
    local ok, d = pcall(cjson.decode, old)
    if ok and type(d) == 'table' then t = d end
    if t.s ~= nil and t.s ~= 'running' then return '' end
  end
  local ok, p = pcall(cjson.decode, prefix .. '}')
  if not ok or type(p) ~= 'table' then return 'the entry is not JSON' end
  local m = {}
  for k, v in pairs(t) do
    if p[k] == nil and k ~= 'a' and k ~= 'f' and k ~= 'k' then m[k] = v end
  end
  local a = t.a
  if a == nil then a = startUs end
  if a == nil or a == '' then a = now end
  a = jv('a', a)
  if endUs == nil or endUs == '' then endUs = now end
  local k = math.max(tonumber(t.k) or 0, tonumber(skips) or 0)
  local e = prefix .. ',"a":' .. a .. ',"f":' .. jv('f', endUs) .. fields(m) .. ',"k":' .. string.format('%d', k) .. '}'
  local res = redis.pcall('HSET', LK.ledger, id, e)
  if type(res) == 'table' and res.err then return res.err end
  finalCount(id, p.s, a)
  if type(old) ~= 'string' then
    redis.pcall('ZADD', LK.order, a, id)
    count(a, 'r', 1)
    trim(keep, holder, id)
    ledgerExpire()
  end
  return ''
end
