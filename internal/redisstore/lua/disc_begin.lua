#!lua
-- disc_begin.lua: start, or take over from a create that died, the loading of one
-- shard of a discount campaign.
-- KEYS[1] meta  KEYS[2] staging  KEYS[3] pool  KEYS[4] usage  KEYS[5] reservations
-- KEYS[6] holds  KEYS[7] confirms  KEYS[8] dead  KEYS[9] xfers  KEYS[10] applied
-- ARGV[1] load token (random, names this loader)
-- ARGV[2] '0' at the campaign's root shard, which draws the load's epoch; at shard
--         k >= 1 the epoch its root's begin drew. A shard k >= 1 past loading that
--         never reserved, lent or borrowed anything (activated by a create that died
--         before the root went live) is loaded afresh.
-- ARGV[3] at the root, the hold in ms (as for begin.lua); ignored at other shards
-- ARGV[4..] field, value pairs of the campaign spec, stored in meta
-- Reply   {0, epoch} loading started; {1, state} the shard exists and is past loading;
--         {2, ms} another create holds the root's load for ms more, or, at shard
--         k >= 1, a newer load began it ({2, 0})
-- Errors  HBARGS odd field list, an epoch or hold that is not an integer
-- Writes  when loading starts: DEL of all ten keys, then HSET of meta (state loading,
--         load_token, load_epoch, zero staged counters; at the root load_lease and
--         load_until; the spec fields).
-- Complexity O(fields) plus deleting the leftovers of an earlier, unfinished load.
-- A shard still loading has never answered a reservation (disc_reserve.lua says
-- NO_CAMPAIGN), so whatever an interrupted load left behind can be thrown away once
-- its hold lapsed; so can a shard whose counters show that nothing ever left or
-- entered it.
local meta, staging, pool, usage, resv, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local confirms, dead, xfers, applied = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
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
  local m = redis.call('HMGET', meta, 'in_count', 'out_count')
  return (m[1] or '0') == '0' and (m[2] or '0') == '0' and redis.call('HLEN', resv) == 0
end)
if not begun then
  return reply
end
redis.call('DEL', meta, staging, pool, usage, resv, holds, confirms, dead, xfers, applied)
start_load(meta, token, epoch, begun, lease, now, {unpack(ARGV, 4)})
return {0, begun}
