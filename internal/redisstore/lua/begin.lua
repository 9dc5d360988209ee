#!lua
-- begin.lua: start, or restart after a crash, the loading of a campaign.
-- KEYS[1] meta  KEYS[2] staging  KEYS[3] pool  KEYS[4] claims  KEYS[5] grants  KEYS[6] dead
-- ARGV[1] load token (random, names this loader)
-- ARGV[2..] field, value pairs of the campaign spec, stored in meta
-- Reply   {0, ''} loading started; {1, state} the campaign exists and is past loading
-- Errors  HBARGS odd field list
-- Writes  unless the campaign is past loading: DEL of all six keys, then HSET of meta
--         (state loading, the token, zero staged counters, the spec fields).
-- Complexity O(fields) plus deleting the leftovers of an earlier, unfinished load.
-- A campaign still loading has never answered a grab (grab.lua says NO_CAMPAIGN),
-- so whatever an interrupted load left behind can be thrown away.
local meta, staging, pool, claims, grants, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token = ARGV[1]

local state = redis.call('HGET', meta, 'state')
if state and state ~= 'loading' then
  return {1, state}
end
if #ARGV % 2 ~= 1 then
  return redis.error_reply('HBARGS spec fields must come in pairs')
end
redis.call('DEL', meta, staging, pool, claims, grants, dead)
redis.call('HSET', meta, 'state', 'loading', 'load_token', token,
  'staged_count', 0, 'staged_cents', 0, unpack(ARGV, 2))
return {0, ''}
