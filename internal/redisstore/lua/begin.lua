#!lua
-- begin.lua: start, or restart after a crash, the loading of a campaign (or of one
-- shard of a sharded campaign).
-- KEYS[1] meta  KEYS[2] staging  KEYS[3] pool  KEYS[4] claims  KEYS[5] grants  KEYS[6] dead
-- KEYS[7] xfers  KEYS[8] applied
-- ARGV[1] load token (random, names this loader)
-- ARGV[2] '1' to restart a shard past loading that never granted, lent or borrowed
--         a packet (a shard other than the root, activated by a create that crashed
--         before the root went live); '0' otherwise
-- ARGV[3..] field, value pairs of the campaign spec, stored in meta
-- Reply   {0, ''} loading started; {1, state} the campaign exists and is past loading
-- Errors  HBARGS odd field list
-- Writes  unless the campaign is past loading: DEL of all eight keys, then HSET of
--         meta (state loading, the token, zero staged counters, the spec fields).
-- Complexity O(fields) plus deleting the leftovers of an earlier, unfinished load.
-- A campaign still loading has never answered a grab (grab.lua says NO_CAMPAIGN),
-- so whatever an interrupted load left behind can be thrown away; so can a shard
-- whose counters show that nothing ever left or entered it.
local meta, staging, pool, claims, grants, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local xfers, applied = KEYS[7], KEYS[8]
local token, unused = ARGV[1], ARGV[2]

local m = redis.call('HMGET', meta, 'state', 'granted_count', 'in_count', 'out_count')
local state = m[1]
if state and state ~= 'loading' then
  local idle = unused == '1' and (m[2] or '0') == '0' and (m[3] or '0') == '0' and (m[4] or '0') == '0'
  if not idle then
    return {1, state}
  end
end
if #ARGV % 2 ~= 0 then
  return redis.error_reply('HBARGS spec fields must come in pairs')
end
redis.call('DEL', meta, staging, pool, claims, grants, dead, xfers, applied)
redis.call('HSET', meta, 'state', 'loading', 'load_token', token,
  'staged_count', 0, 'staged_cents', 0, unpack(ARGV, 3))
return {0, ''}
