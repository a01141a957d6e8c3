-- fleet.lua: add one entry to a key's fleet record, for a run whose entry did not travel
-- with its release (missed and error runs, which hold no lock; a run whose output was
-- still on its way to a slow reader when the lock was let go).
--
-- KEYS[1] the tick record (read for its skip count), KEYS[2] the record: a list, newest first
-- ARGV[1] the entry's JSON without its closing brace and without "a", "f", "k"
-- ARGV[2] how many entries to keep, ARGV[3] start in µs ('' = TIME now),
-- ARGV[4] end in µs ('' = TIME now), ARGV[5] the run id (its tick's skips are copied)
--
-- Returns '' when the entry was written, else the error the server gave (a full server).

if redis.replicate_commands then redis.replicate_commands() end

local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local a, f = ARGV[3], ARGV[4]
if a == '' then a = now end
if f == '' then f = now end

local skips = 0
local ok, r = pcall(cjson.decode, redis.call('GET', KEYS[1]) or '')
if ok and type(r) == 'table' and r.run_id == ARGV[5] then skips = tonumber(r.skips) or 0 end

-- Sent again after a lost reply: the entry (same run id and fields) is there already.
local head = redis.pcall('LRANGE', KEYS[2], 0, 9)
if type(head) == 'table' then
  for _, x in ipairs(head) do
    if string.sub(x, 1, #ARGV[1]) == ARGV[1] then return '' end
  end
end

local e = ARGV[1] .. ',"a":' .. a .. ',"f":' .. f .. ',"k":' .. string.format('%d', skips) .. '}'
local res = redis.pcall('LPUSH', KEYS[2], e)
if type(res) == 'table' and res.err then return res.err end
redis.pcall('LTRIM', KEYS[2], 0, (tonumber(ARGV[2]) or 200) - 1)
-- 400 days after the last run: a retired job's record must not fill a noeviction server.
redis.pcall('PEXPIRE', KEYS[2], 34560000000)
return ''
