#!lua
-- lease_hold.lua: take a lease when it is free, or extend it when the caller
-- holds it. One process of several at a time holds a lease (serve's
-- scheduler: settlement, closes on time, refunds).
-- KEYS[1] the lease key
-- ARGV[1] the caller's token (random, per process)  ARGV[2] ttl in ms
-- Reply   1 when the caller holds the lease afterwards, else 0
-- Errors  HBARGS a ttl that is not a positive integer (before any write)
-- Writes  SET of the key with PX ttl when it is free; PEXPIRE when the caller
--         holds it.
-- Complexity O(1)
local key, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('HBARGS lease ttl ' .. tostring(ARGV[2]))
end
local holder = redis.call('GET', key)
if not holder then
  redis.call('SET', key, token, 'PX', ttl)
  return 1
end
if holder == token then
  redis.call('PEXPIRE', key, ttl)
  return 1
end
return 0
