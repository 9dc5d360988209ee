#!lua
-- begin.lua: start, or take over from a create that died, the loading of a campaign
-- (or of one shard of a sharded campaign).
-- KEYS[1] meta  KEYS[2] staging  KEYS[3] pool  KEYS[4] claims  KEYS[5] grants  KEYS[6] dead
-- KEYS[7] xfers  KEYS[8] applied
-- ARGV[1] load token (random, names this loader)
-- ARGV[2] '0' at the campaign's root, which draws the load's epoch; at shard k >= 1 the
--         epoch its root's begin drew. A shard k >= 1 past loading that never granted,
--         lent or borrowed a packet (activated by a create that died before the root
--         went live) is loaded afresh.
-- ARGV[3] at the root, the hold in ms: how long the load holds the campaign unless
--         renewed (load.lua, renew.lua); ignored at other shards
-- ARGV[4..] field, value pairs of the campaign spec, stored in meta
-- Reply   {0, epoch} loading started under this epoch; {1, state} the campaign exists
--         and is past loading, or {1, 'loading'} when a rebuild holds it (hongbao
--         rebuild); {2, ms} another create holds the root's load for ms more (wait,
--         then begin again), or, at shard k >= 1, a newer load began it ({2, 0}: this
--         loader lost the campaign)
-- Errors  HBARGS odd field list, an epoch or hold that is not an integer
-- Writes  when loading starts: DEL of all eight keys, then HSET of meta (state loading,
--         load_token, load_epoch, zero staged counters; at the root load_lease and
--         load_until; the spec fields).
-- Complexity O(fields) plus deleting the leftovers of an earlier, unfinished load.
-- A campaign still loading has never answered a grab (grab.lua says NO_CAMPAIGN),
-- so whatever an interrupted load left behind can be thrown away once its hold
-- lapsed; so can a shard whose counters show that nothing ever left or entered it.
local meta, staging, pool, claims, grants, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local xfers, applied = KEYS[7], KEYS[8]
local token, epoch, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
--@include loader.lua

if #ARGV % 2 ~= 1 then
  return redis.error_reply('HBARGS spec fields must come in pairs')
end
if not epoch or epoch < 0 or epoch % 1 ~= 0 or not lease or lease < 0 or lease % 1 ~= 0 then
  return redis.error_reply('HBARGS epoch and hold must be integers of at least 0')
end
local now = clock_ms()
local begun, reply = begin_gate(meta, token, epoch, now, function()
  local m = redis.call('HMGET', meta, 'granted_count', 'in_count', 'out_count')
  return (m[1] or '0') == '0' and (m[2] or '0') == '0' and (m[3] or '0') == '0'
end)
if not begun then
  return reply
end
redis.call('DEL', meta, staging, pool, claims, grants, dead, xfers, applied)
start_load(meta, token, epoch, begun, lease, now, {unpack(ARGV, 4)})
return {0, begun}
