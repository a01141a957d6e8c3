-- renew.lua: extend a lease, only if the lock still holds our token.
--
-- KEYS[1] the lock, ARGV[1] token, ARGV[2] ttl in ms
--
-- Returns 1 when the lease was extended by ttl from now, 0 when the lock is missing, holds
-- another token, or was already released (lost). It never re-creates a missing key.

if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local ok, h = pcall(cjson.decode, cur)
if not ok or type(h) ~= 'table' or h.token ~= ARGV[1] or h.released_us then return 0 end

local t = redis.call('TIME')
h.renewed_us = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
h.ttl_ms = tonumber(ARGV[2])
redis.call('SET', KEYS[1], cjson.encode(h), 'PX', ARGV[2], 'XX')
return 1
