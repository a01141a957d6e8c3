-- acquire.lua: take a lock for one token, or say who holds it, or why it must not be taken.
--
-- KEYS[1] the lock (a string: a JSON object with the token and holder metadata, with PX)
-- KEYS[2] the persistent fencing counter of that lock (no TTL): a decimal integer
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] node, ARGV[4] pid, ARGV[5] run id,
-- ARGV[6] the holder's wall clock in ms (reported as "since"),
-- ARGV[7] '1' when the user allows a server that can evict keys (no INFO is read then)
-- With --schedule (README, "Once per tick"), also:
-- KEYS[3] the tick record (a JSON string, 400-day TTL): tick_us, prev_us (the tick it
--   replaced, for giving back), expr, tz, node, run_id, skips, missed
-- ARGV[8] the run's tick in UTC microseconds ('' = no schedule: KEYS[3] is not read),
-- ARGV[9] the largest clock skew allowed in ms ('0' = no check), ARGV[10] EXPR,
-- ARGV[11] zone, ARGV[12] 'missed' to claim the tick alone, as missed, without the lock
-- The ledger (README, "The fleet's record"), written at every claim (lock, tick, missed) in this same call:
-- KEYS[4] the ledger's hash, KEYS[5] its order, KEYS[6] its per-day counters (ledger.lua,
--   which redis.go puts in front of this script; the tick logic may count never-fired
--   ticks there with count(nowS, 'n', N))
-- ARGV[13] the claim's entry, Go-encoded without its closing brace, without "fe", "a",
--   "f", "k" ('' = write none); ARGV[14] how many entries to keep (CRONLOCK_FLEET_KEEP)
-- ARGV[15] with --min-replicas, how long (ms) the tick's claim stays pending: until the
--   replicas acknowledged it or it was given back (release.lua clears it); '0' = none
-- A skip is counted in the claimer's entry ("k"), found by its run id.
-- Always sent (ARGV[8] to ARGV[12] are then '' without a schedule):
-- ARGV[16] --start-deadline in ms ('0' = none), judged on TIME when ARGV[9] > 0
-- ARGV[17] '1' when this host claimed the key on this server before (data loss check)
-- ARGV[18] the schedule's tick before ARGV[8], µs ('' = none): the never-fired check
-- ARGV[19] the schedule in canonical form with its zone, "0 0 * * * UTC"
-- ARGV[20] a hash of the command ('' = none)
-- Standbys (README, "Standby takeover"); KEYS[7] the tick's standby slots (sorted set:
--   run id scored by the TIME ms its slot expires):
-- ARGV[21] '' (no standby), 'lost' (--standby) or 'failed' (--standby=failed)
-- ARGV[22] --max-attempts, ARGV[23] --standbys, ARGV[24] a slot's lease in ms
-- ARGV[25] the run id of the tick's run that this standby's own clock says has lost its
--   lease ('' = not yet): only then may a lost run be taken over, and only if the lock
--   is gone here too
-- ARGV[26] '1' when this claim's holder may go on running after losing its lease
--   (--on-lock-lost continue, or no guard): it is never taken over
-- The index of known keys (redisjobs.go), written at every claim of a lock or a tick:
-- ARGV[27] the key's name ('' = no index: nothing is written), and then the last of KEYS
--   (after every other, whatever their number) is the index, a sorted set of key names by
--   the TIME (s) of their last claim, in this key's slot
--
-- KEYS[8] the key's suspension (cronlock suspend; a JSON string, lockrun's
--   EncodeSuspension, expiring at its until): read here, so a suspended key costs no
--   round trip of its own
--
-- marks collects what the claim found, in the JSON names of lockrun.FleetEntry, and goes
-- into the claim's entry: sc (the previous claim's "EXPR ZONE" when the schedule
-- changed), fl (it flipped back to one of the last 24 h), dl (the fencing counter was
-- gone although this host knew the key: the server lost its data), ch (command hash).
-- Ticks never claimed (nf just after the last claimed or held tick, nt the last of them;
-- readers count them with the schedule) get an entry of their own, never_fired. nf and
-- nt are decimal strings (cjson writes a µs number as 1.8e+15).
--
-- The order: refusals that write nothing, the clock skew, the tick, the lock.
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
-- Returns {6, ms, record} when this tick's claim by another run is pending (--min-replicas,
--   ARGV[15]) for ms more: ask again then. Nothing is written.
-- Returns {3, '', lerr} when ARGV[12] is 'missed' and the tick was claimed for this run.
-- lerr (also the 5th item of a taken lock's reply) is '' or why the ledger's entry could
-- not be written: the claim stands all the same. A taken lock's reply carries marks as
-- its 6th item: a JSON object, or '' when empty.
-- Returns {7, pttl, value, at, run_id, node} when ARGV[21] is set and this tick's run may still be
--   running: this run holds a standby slot; pttl is the lock's (-2: gone), value its
--   holder ('' = none), at the tick's attempt, run_id and node the tick's run. Only
--   the slot is written.
-- Returns {8, why, status, node, run_id, at} when ARGV[21] is set and the standby ends
--   without taking over: why is 'done' (the tick's run completed it with status),
--   'nontakeable', or 'attempts' (at reached ARGV[22]). Its slot is freed.
-- A standby that finds no free slot gets {2, record}, a skip.
-- A takeover claims as usual ({1, …}), with at and to (the lost run) in marks.
-- Returns {9, suspension, lerr} when the key is suspended (checked after the clock skew,
--   before the tick, standbys and the lock; a retried acquire of a lock already ours
--   still gets it): no lock or tick is claimed. The first run of a tick writes the
--   tick's entry, status suspended ('suspended-<tick µs>'; without a schedule one per
--   suspension and node); later runs count themselves in it ("c", "l"). The tick is
--   noted as fired-but-held, so that the claim after a resume does not call the ticks
--   of the suspension never fired.
-- Returns {4, early_ms} when ARGV[9] > 0 and the tick has not come yet on TIME: nothing
--   is written; the run sleeps that long and asks again.
-- Returns {5, late_ms, marks} when ARGV[9] > 0, ARGV[16] > 0 and TIME is past tick +
--   deadline: the tick was claimed as missed for this run, and no lock taken; the run
--   writes its entry (fleet.lua), which knows its exit and message.

-- Needed before Redis 5 to write after TIME; a no-op (or absent) since.
if redis.replicate_commands then redis.replicate_commands() end

local missedMode = ARGV[12] == 'missed'
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

-- Fields the tick logic adds to this claim's entry (see the header).
local marks = {}

LK.ledger, LK.order, LK.days = KEYS[4], KEYS[5], KEYS[6] -- the ledger (ledger.lua)

-- claimEntry writes the claim's entry: ARGV[13] and what only the server knows. The
-- never-fired range has an entry of its own (neverFiredEntry), not the run's.
local function claimEntry(tail, holder)
  if (ARGV[13] or '') == '' then return '' end
  local m = {}
  for k, v in pairs(marks) do
    if k ~= 'nf' and k ~= 'nt' then m[k] = v end
  end
  local e = ARGV[13] .. tail .. ',"a":' .. nowS .. fields(m) .. ',"k":0}'
  return addEntry(ARGV[5], e, nowS, tonumber(ARGV[14]) or 200, holder)
end

-- A standby's view of the tick's run (ARGV[21]): nil when it is lost (or gave up the
-- tick gracefully) and this run takes it over (takeover is then set), or the reply.
local takeover
local RESUMABLE = {SIGTERM=1, SIGHUP=1}
local function standby(rec)
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local at = tonumber(rec.at) or 1
  local function slotEnd(why, st)
    redis.pcall('ZREM', KEYS[7], ARGV[5])
    return {8, why, st or '', rec.node or '', rec.run_id, string.format('%d', at)}
  end
  local raw = redis.pcall('HGET', KEYS[4], rec.run_id)
  local ent
  if type(raw) == 'string' then
    local ok, d = pcall(cjson.decode, raw)
    if ok and type(d) == 'table' then ent = d end
  end
  local st = ent and ent.s
  -- lock_lost: the run stopped its job fail-closed (cut off, or frozen past its lease and
  -- woken) and completed its entry before a standby asked; it did not complete the tick.
  local takeable = st == 'running' or st == 'lock_lost'
  if st == 'interrupted' and RESUMABLE[ent.sig or ''] then takeable = true end
  if st == 'timeout' and ent.hb then takeable = true end -- hung: --heartbeat-timeout
  if ARGV[21] == 'failed' and (st == 'failed' or st == 'timeout') then takeable = true end
  if st ~= nil and not takeable then return slotEnd('done', st) end
  if rec.nt then return slotEnd('nontakeable', st) end
  if at >= (tonumber(ARGV[22]) or 3) then return slotEnd('attempts', st) end
  -- A lost run's lock must be gone here and its lease over on the standby's own clock;
  -- an entry that is not there is never taken for lost.
  if not cur and st ~= nil and (st ~= 'running' or ARGV[25] == rec.run_id) then
    redis.pcall('ZREM', KEYS[7], ARGV[5])
    takeover = {of = rec.run_id, node = rec.node or '', at = at + 1, st = st}
    return nil
  end
  redis.pcall('ZREMRANGEBYSCORE', KEYS[7], '-inf', nowMs)
  if not redis.pcall('ZSCORE', KEYS[7], ARGV[5]) then
    local n = redis.pcall('ZCARD', KEYS[7])
    if type(n) == 'number' and n >= (tonumber(ARGV[23]) or 2) then return nil end -- no slot: a skip
  end
  redis.pcall('ZADD', KEYS[7], nowMs + (tonumber(ARGV[24]) or 60000), ARGV[5])
  redis.pcall('PEXPIRE', KEYS[7], (tonumber(ARGV[24]) or 60000) * 2)
  local pttl = -2
  if cur then pttl = redis.call('PTTL', KEYS[1]) end
  return {7, pttl, cur or '', string.format('%d', at), rec.run_id, rec.node or ''}
end

-- The suspension, in force unless its until has passed on this server's clock (its
-- expiry is the same instant; the check covers a value written without one).
local tickUs = ARGV[8] or ''
local rec
local susp = KEYS[8] and redis.call('GET', KEYS[8])
local suspV
if susp then
  local ok, s = pcall(cjson.decode, susp)
  if ok and type(s) == 'table' then suspV = s else suspV = {} end
  if type(suspV.until_us) == 'string' and string.match(suspV.until_us, '^%d+$') and not greater(suspV.until_us, nowS) then
    susp = nil
  end
end

local function suspended()
  local lerr = ''
  -- A standby that finds the key suspended ends: its slot goes with it.
  if (ARGV[21] or '') ~= '' then redis.pcall('ZREM', KEYS[7], ARGV[5]) end
  if (ARGV[13] or '') ~= '' then
    local since = suspV.since_us
    if type(since) ~= 'string' then since = '0' end
    local id = 'suspended-' .. (tickUs ~= '' and tickUs or (since .. '-' .. ARGV[3]))
    local old = redis.pcall('HGET', KEYS[4], id)
    if type(old) == 'string' then
      local ok, d = pcall(cjson.decode, old)
      local c = ok and type(d) == 'table' and tonumber(d.c) or 1
      local e = string.gsub(old, ',"c":%d+', '')
      e = string.gsub(e, ',"l":%d+', '')
      e = string.gsub(e, ',"k":(%d+)}$', function(k) return ',"c":' .. string.format('%d', c + 1) .. ',"l":' .. nowS .. ',"k":' .. k .. '}' end)
      local res = redis.pcall('HSET', KEYS[4], id, e)
      if type(res) == 'table' and res.err then lerr = res.err end
    else
      local note = 'suspended by ' .. tostring(suspV.by or '?')
      if type(suspV.reason) == 'string' and suspV.reason ~= '' then note = note .. ': ' .. suspV.reason end
      local e = string.gsub(ARGV[13], '^{"id":"[^"]*"', function() return '{"id":' .. cjson.encode(id) end, 1)
      e = string.gsub(e, '"s":"[%w_]*"', '"s":"suspended"', 1)
      e = e .. ',"e":' .. cjson.encode(string.sub(note, 1, 200)) .. ',"a":' .. nowS .. ',"f":' .. nowS .. ',"c":1,"l":' .. nowS .. ',"k":0}'
      -- The run holding the lock (suspended under a running job) keeps its entry.
      local holder
      if cur then
        local okh, h = pcall(cjson.decode, cur)
        if okh and type(h) == 'table' then holder = h.run_id end
      end
      lerr = addEntry(id, e, nowS, tonumber(ARGV[14]) or 200, holder, true)
    end
  end
  if rec and tickUs ~= '' and greater(tickUs, rec.tick_us) and not (type(rec.held_us) == 'string' and not greater(tickUs, rec.held_us)) then
    rec.held_us = tickUs
    redis.pcall('SET', KEYS[3], cjson.encode(rec), 'KEEPTTL', 'XX')
  end
  return {9, susp, lerr}
end

-- The tick: a fast clock would claim the next tick early and make the fleet skip it, so
-- the skew is checked first. A record of this tick or a later one, not this run's own
-- (a retried acquire), means the tick was run: a skip, counted in the record.
if tickUs == '' and susp then return suspended() end
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
  if susp then return suspended() end
  -- A --min-replicas claim of this very tick not yet confirmed: the claimer may still
  -- give it back (a shortfall), so wait for it rather than skip.
  if rec and rec.run_id ~= ARGV[5] and rec.tick_us == tickUs and type(rec.pending_until) == 'string' then
    local left = (tonumber(rec.pending_until) or 0) - tonumber(nowS)
    if left > 0 then return {6, string.format('%.0f', math.ceil(left / 1000)), raw} end
  end
  if (ARGV[21] or '') ~= '' and not missedMode and rec and rec.run_id ~= ARGV[5] and rec.run_id ~= '' and rec.tick_us == tickUs and not rec.missed then
    local sb = standby(rec)
    if sb then return sb end
  end
  if rec and rec.run_id ~= ARGV[5] and not greater(tickUs, rec.tick_us) and not takeover then
    rec.skips = (tonumber(rec.skips) or 0) + 1
    local v = cjson.encode(rec)
    -- pcall: a full server must not turn a skip into an error; the count is a nicety.
    redis.pcall('SET', KEYS[3], v, 'KEEPTTL', 'XX')
    -- The claimer's entry gets the count too, found by its run id (one HGET).
    if rec.run_id and rec.run_id ~= '' then
      -- pcall: an ACL without hash rights must not turn a skip into an error.
      local e = redis.pcall('HGET', KEYS[4], rec.run_id)
      if type(e) == 'string' then
        local n = string.gsub(e, ',"k":%d+}$', ',"k":' .. string.format('%d', rec.skips) .. '}')
        redis.pcall('HSET', KEYS[4], rec.run_id, n)
      end
    end
    return {2, v}
  end
  -- The backend's clock decides: a host ahead by less than the skew allowed
  -- must not claim a tick before it has come, nor call it missed before tick + deadline.
  if maxSkew > 0 and not missedMode then
    local diff = tonumber(nowS) - tonumber(tickUs) -- µs; exact in a double up to 2^53
    if diff < 0 then
      return {4, string.format('%.0f', math.ceil(-diff / 1000))}
    end
    local dl = tonumber(ARGV[16]) or 0
    if dl > 0 and diff > dl * 1000 then missedMode = 'judged' end
  end
end

-- The marks of a claim of this tick: the schedule change and flip, never-fired ticks.
-- sched (in the record) keeps the schedules claimed in the last 24 h, {cx, µs} each.
local cx = ARGV[19] or ''
local sched = {}
if tickUs ~= '' then
  if ARGV[20] and ARGV[20] ~= '' then marks.ch = ARGV[20] end
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
    local prev = ARGV[18] or ''
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
elseif ARGV[20] and ARGV[20] ~= '' then
  marks.ch = ARGV[20]
end

local function marksJSON()
  if next(marks) == nil then return '' end
  return cjson.encode(marks)
end

-- Ticks never claimed get an entry of their own in the ledger, once, at the claim that
-- found them (id: the claim's run id + "-nf"), and one never-fired gap in the day's
-- counters (the ticks in it are counted by readers, with the schedule).
-- indexKey notes the key in the index of known keys (the last of KEYS) and drops the
-- names that no claim wrote in 400 days; a pcall: the index is for readers, never a
-- claim's refusal.
local ITTL = 34560000
local function indexKey()
  if (ARGV[27] or '') == '' then return end
  local idx, s = KEYS[#KEYS], tonumber(string.sub(nowS, 1, -7))
  redis.pcall('ZADD', idx, s, ARGV[27])
  redis.pcall('ZREMRANGEBYSCORE', idx, '-inf', '(' .. (s - ITTL))
  redis.pcall('PEXPIRE', idx, ITTL * 1000)
end

local function neverFiredEntry()
  if not marks.nt or (ARGV[13] or '') == '' then return end
  local e = '{"id":"' .. ARGV[5] .. '-nf","n":' .. cjson.encode(ARGV[3]) .. ',"s":"never_fired","t":' .. marks.nt ..
    ',"d":0,"r":0,"nf":' .. marks.nf .. ',"nt":' .. marks.nt .. ',"a":' .. nowS .. ',"f":' .. nowS .. ',"k":0}'
  local _, added = addEntry(ARGV[5] .. '-nf', e, nowS, tonumber(ARGV[14]) or 200, nil, true)
  if added then count(nowS, 'n', 1) end
end

-- A new claim resets the record; prev_us lets a run whose job never started give the
-- tick back. 400 days: the record of a retired job must not stay on a noeviction server.
local function claimTick(missed)
  local prev = ''
  if rec then
    prev = rec.tick_us
    -- A takeover keeps the tick before: a give-back must not leave this tick claimed.
    if rec.run_id == ARGV[5] or takeover then prev = rec.prev_us or '' end
  end
  local pending
  local win = tonumber(ARGV[15] or '') or 0
  if not missed and win > 0 then pending = string.format('%.0f', tonumber(nowS) + win * 1000) end
  local r = {
    tick_us = tickUs, prev_us = prev, expr = ARGV[10], tz = ARGV[11], node = ARGV[3],
    run_id = ARGV[5], skips = 0, missed = missed, claimed_us = nowS, pending_until = pending,
  }
  if cx ~= '' then r.cx = cx; r.sched = sched end
  if ARGV[26] == '1' then r.nt = true end
  if takeover then
    r.at, r.to = takeover.at, takeover.of
    -- The lost run's entry says who took its tick over; a later completion (a frozen
    -- holder that woke) leaves it as it is.
    if takeover.st == 'running' then
      local e = redis.pcall('HGET', KEYS[4], takeover.of)
      if type(e) == 'string' then
        local note = cjson.encode('taken over by run ' .. ARGV[5] .. ' on ' .. ARGV[3] .. ' as attempt ' .. takeover.at)
        e = string.gsub(e, '"s":"running"', '"s":"abandoned"', 1)
        e = string.gsub(e, ',"k":(%d+)}$', ',"e":' .. string.gsub(note, '%%', '%%%%') .. ',"f":' .. nowS .. ',"k":%1}', 1)
        redis.pcall('HSET', KEYS[4], takeover.of, e)
        finalCount(takeover.of, 'abandoned', nowS)
      end
    end
    marks.at, marks.to = takeover.at, takeover.of
  end
  redis.call('SET', KEYS[3], cjson.encode(r), 'PX', 34560000000)
  neverFiredEntry()
  indexKey()
end

if missedMode == 'judged' then
  claimTick(true)
  return {5, string.format('%.0f', (tonumber(nowS) - tonumber(tickUs)) / 1000), marksJSON()}
end

if missedMode then
  claimTick(true)
  local holder
  if cur then
    local ok, h = pcall(cjson.decode, cur)
    if ok and type(h) == 'table' then holder = h.run_id end
  end
  local lerr, added = claimEntry(',"f":' .. nowS, holder)
  if added then finalCount(ARGV[5], 'missed', nowS) end
  return {3, '', lerr}
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
-- The counter has no TTL and is never deleted by cronlock: gone while this host has
-- claimed the key here before, the server lost its data (and with it the tick record).
if not stored and ARGV[17] == '1' then marks.dl = true end
-- The first write: a full server refuses it before anything was written, and once a
-- script has written, Redis lets it finish, so tick and lock are claimed together.
redis.call('SET', KEYS[2], fence)
if tickUs ~= '' then claimTick(false) end

local v = cjson.encode({
  token = ARGV[1], fence = fence, node = ARGV[3], pid = tonumber(ARGV[4]) or 0,
  run_id = ARGV[5], since_ms = ARGV[6], acquired_us = nowS, renewed_us = nowS,
  ttl_ms = tonumber(ARGV[2]), nt = (ARGV[26] == '1') or nil,
})
redis.call('SET', KEYS[1], v, 'PX', ARGV[2], 'NX')
if tickUs == '' then indexKey() end
local lerr = claimEntry(',"fe":' .. fence, ARGV[5])
return {1, fence, warn, nowS, lerr, marksJSON()}
