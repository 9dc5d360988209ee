#!lua
-- disc_begin.lua: start, or restart after a crash, the loading of one shard of a
-- discount campaign.
-- KEYS[1] meta  KEYS[2] staging  KEYS[3] pool  KEYS[4] usage  KEYS[5] reservations
-- KEYS[6] holds  KEYS[7] confirms  KEYS[8] dead  KEYS[9] xfers  KEYS[10] applied
-- ARGV[1] load token (random, names this loader)
-- ARGV[2] '1' to restart a shard past loading that never reserved, lent or borrowed
--         anything (a shard other than the root, activated by a create that crashed
--         before the root went live); '0' otherwise
-- ARGV[3..] field, value pairs of the campaign spec, stored in meta
-- Reply   {0, ''} loading started; {1, state} the shard exists and is past loading
-- Errors  HBARGS odd field list
-- Writes  unless the shard is past loading: DEL of all ten keys, then HSET of meta
--         (state loading, the token, zero staged counters, the spec fields).
-- Complexity O(fields) plus deleting the leftovers of an earlier, unfinished load.
-- A shard still loading has never answered a reservation (disc_reserve.lua says
-- NO_CAMPAIGN), so whatever an interrupted load left behind can be thrown away; so
-- can a shard whose counters show that nothing ever left or entered it.
local meta, staging, pool, usage, resv, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local confirms, dead, xfers, applied = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local token, unused = ARGV[1], ARGV[2]

local m = redis.call('HMGET', meta, 'state', 'in_count', 'out_count')
if m[1] and m[1] ~= 'loading' then
  local idle = unused == '1' and (m[2] or '0') == '0' and (m[3] or '0') == '0' and
    redis.call('HLEN', resv) == 0
  if not idle then
    return {1, m[1]}
  end
end
if #ARGV % 2 ~= 0 then
  return redis.error_reply('HBARGS spec fields must come in pairs')
end
redis.call('DEL', meta, staging, pool, usage, resv, holds, confirms, dead, xfers, applied)
redis.call('HSET', meta, 'state', 'loading', 'load_token', token,
  'staged_count', 0, 'staged_cents', 0, unpack(ARGV, 3))
return {0, ''}
