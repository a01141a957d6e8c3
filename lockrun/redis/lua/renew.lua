-- renew.lua: extend a lease, only if the lock still holds our token.
--
-- KEYS[1] the lock, ARGV[1] token, ARGV[2] ttl in ms
--
-- Returns 1 when the lease was extended by ttl from now, 0 when the lock is missing, holds
-- another token, or was already released, 2 when `unlock --force` revoked it (both lost).
-- It never re-creates a missing key.

if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local ok, h = pcall(cjson.decode, cur)
if not ok or type(h) ~= 'table' or h.token ~= ARGV[1] or h.released_us then return 0 end
if h.revoked_us then return 2 end

-- PEXPIRE first, then the holder's metadata with KEEPTTL: a server that reached its
-- maxmemory under noeviction refuses SET (it may grow the value) but never PEXPIRE, and once
-- a script has written Redis lets it finish. So a full server still renews every lease; the
-- SET is a pcall so that a server that refuses it anyway (or predates KEEPTTL, Redis < 6)
-- only leaves renewed_us stale.
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local t = redis.call('TIME')
h.renewed_us = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
h.ttl_ms = tonumber(ARGV[2])
redis.pcall('SET', KEYS[1], cjson.encode(h), 'KEEPTTL', 'XX')
return 1
