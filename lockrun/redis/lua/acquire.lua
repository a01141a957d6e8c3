-- acquire.lua: take a lock for one token, or say who holds it, or why it must not be taken.
--
-- KEYS[1] the lock (a string: a JSON object with the token and holder metadata, with PX)
-- KEYS[2] the persistent fencing counter of that lock (no TTL): a decimal integer
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] node, ARGV[4] pid, ARGV[5] run id,
-- ARGV[6] the holder's wall clock in ms (reported as "since"),
-- ARGV[7] '1' when the user allows a server that can evict keys (no INFO is read then)
-- With --schedule (SPEC §9), also:
-- KEYS[3] the tick record (a JSON string, 400-day TTL): tick_us, prev_us (the tick it
--   replaced, for giving back), expr, tz, node, run_id, skips, missed
-- ARGV[8] the run's tick in UTC microseconds ('' = no schedule: KEYS[3] is not read),
-- ARGV[9] the largest clock skew allowed in ms ('0' = no check), ARGV[10] EXPR,
-- ARGV[11] zone, ARGV[12] 'missed' to claim the tick alone, as missed, without the lock
-- KEYS[4] the fleet's record (a list of JSON entries, newest first): a skip is also
--   counted in the claimer's entry ("k") when that entry is already written and newest
-- Always sent (ARGV[8] to ARGV[12] are then '' without a schedule):
-- ARGV[13] --start-deadline in ms ('0' = none), judged on TIME when ARGV[9] > 0
-- ARGV[14] '1' when this host claimed the key on this server before (data loss check)
-- ARGV[15] the schedule's tick before ARGV[8], µs ('' = none): the never-fired check
-- ARGV[16] the schedule in canonical form with its zone, "0 0 * * * UTC"
-- ARGV[17] a hash of the command ('' = none)
--
-- marks collects what the claim found, in the JSON names of lockrun.FleetEntry: sc (the
-- previous claim's "EXPR ZONE" when the schedule changed), fl (it flipped back to one of
-- the last 24 h), nf/nt (the ticks never claimed: nf just after the last claimed or held
-- tick, nt the last of them; count them with the schedule), dl (the fencing counter was
-- gone although this host knew the key: the server lost its data), ch (command hash).
-- nf and nt are decimal strings (cjson writes a µs number as 1.8e+15): whoever puts
-- marks into an entry writes them as digits ('"nf":' .. marks.nf), as FleetEntry reads.
--
-- The order is SPEC §9's: refusals that write nothing, the clock skew, the tick, the lock.
--
-- Returns {1, fence, warn, acquired} when the lock is ours: taken now, or already held by
--   this very token (a retried acquire whose first reply was lost, go-redis #2985). fence
--   is a decimal string: Lua's numbers are doubles, exact only up to 2^53. warn is '' or
--   the error INFO gave (an ACL without +info): the eviction check could not run.
--   acquired is the server's TIME in µs when the lock was taken (the run's start in the
--   fleet's record).
-- Returns {0, value, pttl} when another token holds it: its stored value and the ms left.
-- Returns {-1, 'evict', policy, maxmemory} when the server can evict the lock, and
--   {-1, 'fence', why, counter} when the counter cannot give a larger token that fits in
--   64 bits (why: 'garbage' or 'max'). Nothing is written in either case.
-- Returns {-1, 'skew', skew_ms, max_ms} when the host's clock (ARGV[6]) is more than
--   ARGV[9] ms away from the server's TIME. Nothing is written.
-- Returns {2, record} when this tick, or a later one, was claimed by another run: the
--   tick record as it now is (its skip count raised). Nothing else is written.
-- Returns {3, ''} when ARGV[12] is 'missed' and the tick was claimed for this run.
-- Returns {4, early_ms} when ARGV[9] > 0 and the tick has not come yet on TIME: nothing
--   is written; the run sleeps that long and asks again.
-- Returns {5, late_ms, marks} when ARGV[9] > 0, ARGV[13] > 0 and TIME is past tick +
--   deadline: the tick was claimed as missed for this run, and no lock taken.
-- {1, …} also carries marks as a fifth element: a JSON object, or '' when empty.

-- Needed before Redis 5 to write after TIME; a no-op (or absent) since.
if redis.replicate_commands then redis.replicate_commands() end

local missedMode = ARGV[12] == 'missed'
local marks = {}
local cur = redis.call('GET', KEYS[1])
if cur and not missedMode then
  local ok, h = pcall(cjson.decode, cur)
  if ok and type(h) == 'table' and h.token == ARGV[1] and not h.revoked_us then
    -- A write, so that a WAIT sent after this retry (--min-replicas) waits for the
    -- replicas to have the lock: WAIT counts only this connection's writes.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, h.fence, '', h.acquired_us or ''}
  end
end

local function greater(a, b) -- a > b, both decimal strings without leading zeros
  if #a ~= #b then return #a > #b end
  return a > b
end

local t = redis.call('TIME')
local nowS = t[1] .. string.format('%06d', tonumber(t[2]))

-- The tick: a fast clock would claim the next tick early and make the fleet skip it, so
-- the skew is checked first. A record of this tick or a later one, not this run's own
-- (a retried acquire), means the tick was run: a skip, counted in the record.
local tickUs = ARGV[8] or ''
local rec
if tickUs ~= '' then
  local maxSkew = tonumber(ARGV[9]) or 0
  if maxSkew > 0 then
    local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local skew = (tonumber(ARGV[6]) or nowMs) - nowMs
    if math.abs(skew) > maxSkew then
      return {-1, 'skew', string.format('%.0f', skew), ARGV[9]}
    end
  end
  local raw = redis.call('GET', KEYS[3])
  if raw then
    local ok, r = pcall(cjson.decode, raw)
    if ok and type(r) == 'table' and type(r.tick_us) == 'string' and string.match(r.tick_us, '^%d+$') then
      rec = r
    end
  end
  if rec and rec.run_id ~= ARGV[5] and not greater(tickUs, rec.tick_us) then
    rec.skips = (tonumber(rec.skips) or 0) + 1
    local v = cjson.encode(rec)
    -- pcall: a full server must not turn a skip into an error; the count is a nicety.
    redis.pcall('SET', KEYS[3], v, 'KEEPTTL', 'XX')
    -- The claimer's run may have ended before this host's cron fired: its entry gets the
    -- count too. Only the newest entry is looked at, so this costs one LINDEX.
    if KEYS[4] and rec.run_id and rec.run_id ~= '' then
      -- pcall: an ACL without list rights must not turn a skip into an error.
      local head = redis.pcall('LINDEX', KEYS[4], 0)
      if type(head) == 'string' and string.find(head, '{"id":"' .. rec.run_id .. '"', 1, true) == 1 then
        local n = string.gsub(head, ',"k":%d+}$', ',"k":' .. string.format('%d', rec.skips) .. '}')
        redis.pcall('LSET', KEYS[4], 0, n)
      end
    end
    return {2, v}
  end
  -- The backend's clock decides (SPEC §10): a host ahead by less than the skew allowed
  -- must not claim a tick before it has come, nor call it missed before tick + deadline.
  if maxSkew > 0 and not missedMode then
    local diff = tonumber(nowS) - tonumber(tickUs) -- µs; exact in a double up to 2^53
    if diff < 0 then
      return {4, string.format('%.0f', math.ceil(-diff / 1000))}
    end
    local dl = tonumber(ARGV[13]) or 0
    if dl > 0 and diff > dl * 1000 then missedMode = 'judged' end
  end
end

-- The marks of a claim of this tick: the schedule change and flip, never-fired ticks.
-- sched (in the record) keeps the schedules claimed in the last 24 h, {cx, µs} each.
local cx = ARGV[16] or ''
local sched = {}
if tickUs ~= '' then
  if ARGV[17] and ARGV[17] ~= '' then marks.ch = ARGV[17] end
  if rec and rec.run_id ~= ARGV[5] then
    local day = tonumber(nowS) - 86400000000
    local flipped = false
    if type(rec.sched) == 'table' then
      for _, e in ipairs(rec.sched) do
        if type(e) == 'table' and type(e[1]) == 'string' and (tonumber(e[2]) or 0) >= day then
          if e[1] == cx then flipped = true end
          if #sched < 8 then sched[#sched + 1] = e end
        end
      end
    end
    if type(rec.cx) == 'string' and cx ~= '' and rec.cx ~= cx then
      marks.sc = rec.cx
      if flipped then marks.fl = true end
    end
    -- Ticks of the same schedule after the last claimed (or fired-but-held) tick and
    -- before this one were never claimed by any host.
    local last = rec.tick_us
    if type(rec.held_us) == 'string' and greater(rec.held_us, last) then last = rec.held_us end
    local prev = ARGV[15] or ''
    if rec.cx == cx and prev ~= '' and greater(prev, last) then
      marks.nf = string.format('%.0f', tonumber(last) + 1)
      marks.nt = prev
    end
  elseif rec and type(rec.sched) == 'table' then
    sched = rec.sched
  end
  local found = false
  for _, e in ipairs(sched) do
    if e[1] == cx then e[2] = nowS; found = true end
  end
  if not found and cx ~= '' then
    if #sched >= 8 then table.remove(sched, 1) end
    sched[#sched + 1] = {cx, nowS}
  end
elseif ARGV[17] and ARGV[17] ~= '' then
  marks.ch = ARGV[17]
end

local function marksJSON()
  if next(marks) == nil then return '' end
  return cjson.encode(marks)
end

-- Until the ledger takes marks into the claim's entry: ticks never claimed get an entry
-- of their own in the fleet's record, once, at the claim that found them.
local function neverFiredEntry()
  if not marks.nt or not KEYS[4] then return end
  local e = '{"id":"' .. ARGV[5] .. '-nf","n":' .. cjson.encode(ARGV[3]) .. ',"s":"never_fired","t":' .. marks.nt ..
    ',"d":0,"r":0,"nf":' .. marks.nf .. ',"nt":' .. marks.nt .. ',"a":' .. nowS .. ',"f":' .. nowS .. ',"k":0}'
  -- No LTRIM: the keep count (CRONLOCK_FLEET_KEEP) is the release's, which trims.
  redis.pcall('LPUSH', KEYS[4], e)
  redis.pcall('PEXPIRE', KEYS[4], 34560000000)
end

-- A new claim resets the record; prev_us lets a run whose job never started give the
-- tick back. 400 days: the record of a retired job must not stay on a noeviction server.
local function claimTick(missed)
  local prev = ''
  if rec then
    prev = rec.tick_us
    if rec.run_id == ARGV[5] then prev = rec.prev_us or '' end
  end
  local r = {
    tick_us = tickUs, prev_us = prev, expr = ARGV[10], tz = ARGV[11], node = ARGV[3],
    run_id = ARGV[5], skips = 0, missed = missed, claimed_us = nowS,
  }
  if cx ~= '' then r.cx = cx; r.sched = sched end
  redis.call('SET', KEYS[3], cjson.encode(r), 'PX', 34560000000)
  neverFiredEntry()
end

if missedMode == 'judged' then
  claimTick(true)
  return {5, string.format('%.0f', (tonumber(nowS) - tonumber(tickUs)) / 1000), marksJSON()}
end
if missedMode then
  claimTick(true)
  return {3, ''}
end

if cur then
  -- Fired but held: this tick came while a run of an earlier tick holds the lock. It
  -- is noted in the record, so that the next claim does not call it never fired.
  if rec and tickUs ~= '' and greater(tickUs, rec.tick_us) and not (type(rec.held_us) == 'string' and not greater(tickUs, rec.held_us)) then
    rec.held_us = tickUs
    redis.pcall('SET', KEYS[3], cjson.encode(rec), 'KEEPTTL', 'XX')
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
local function inc(s) -- s + 1
  local i = #s
  while i > 0 and string.sub(s, i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end

local fence = nowS
local stored = redis.call('GET', KEYS[2])
-- The counter has no TTL and is never deleted by cronlock: gone while this host has
-- claimed the key here before, the server lost its data (and with it the tick record).
if not stored and ARGV[14] == '1' then marks.dl = true end
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
-- The first write: a full server refuses it before anything was written, and once a
-- script has written, Redis lets it finish, so tick and lock are claimed together.
redis.call('SET', KEYS[2], fence)
if tickUs ~= '' then claimTick(false) end

local v = cjson.encode({
  token = ARGV[1], fence = fence, node = ARGV[3], pid = tonumber(ARGV[4]) or 0,
  run_id = ARGV[5], since_ms = ARGV[6], acquired_us = nowS, renewed_us = nowS,
  ttl_ms = tonumber(ARGV[2]),
})
redis.call('SET', KEYS[1], v, 'PX', ARGV[2], 'NX')
return {1, fence, warn, nowS, marksJSON()}
