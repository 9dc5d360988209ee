#!lua
-- lease_release.lua: let go of a lease, only if the caller holds it.
-- KEYS[1] the lease key
-- ARGV[1] the caller's token
-- Reply   1 when it was the caller's and is gone, else 0
-- Errors  none
-- Writes  DEL of the lease key when the caller holds it.
-- Complexity O(1)
local key, token = KEYS[1], ARGV[1]
if redis.call('GET', key) == token then
  return redis.call('DEL', key)
end
return 0
