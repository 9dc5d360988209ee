#!lua
-- dead.lua: put grants that cannot settle into the dead stream and acknowledge
-- their grants-stream entry, in one step.
-- KEYS[1] grants stream  KEYS[2] dead stream
-- ARGV[1] entry id in the grants stream  ARGV[2] reason
-- ARGV[3..] user, packet pairs to record (for a malformed entry: its raw fields)
-- Reply   number of dead entries written; 0 when the entry is no longer pending (another
--         settler of the stream, a part's previous holder still at work, acknowledged or
--         buried it already: it is not buried twice)
-- Errors  HBARGS odd pair list
-- Writes  when the entry is pending: one XADD to the dead stream per pair (one with only entry and reason when
--         there is none), then XACK of the entry in the settle group.
-- Complexity O(pairs). Settlement calls it only after the rest of the entry is
-- committed to the ledger, so acknowledging the entry loses nothing: the good
-- grants are in the ledger, the bad ones are here for an operator.
local grants, dead = KEYS[1], KEYS[2]
local id, reason = ARGV[1], ARGV[2]
if #ARGV % 2 ~= 0 then
  return redis.error_reply('HBARGS user, packet pairs expected')
end
if #redis.call('XPENDING', grants, 'settle', id, id, 1) == 0 then
  return 0
end
local n = 0
for i = 3, #ARGV, 2 do
  redis.call('XADD', dead, '*', 'entry', id, 'reason', reason, 'user', ARGV[i], 'packet', ARGV[i + 1])
  n = n + 1
end
if n == 0 then
  redis.call('XADD', dead, '*', 'entry', id, 'reason', reason)
  n = 1
end
redis.call('XACK', grants, 'settle', id)
return n
