#!lua
-- rebuild_activate.lua: make a rebuilt shard live again.
-- KEYS[1] meta  KEYS[2] blocked users
-- ARGV[1] rebuild token  ARGV[2] state: scheduled, open or closed
-- ARGV[3] paused: 1 to activate the shard paused, 0 to leave meta's paused as the
--         swap left it
-- ARGV[4] close_reason and ARGV[5] closed_at (ms), for a closed shard
-- Reply   the state set
-- Errors  HBSTALE another rebuild took over, or this one has not swapped the shard;
--         HBARGS a state that is not scheduled, open or closed, a closed one
--         without its reason, or paused not 0 or 1
-- Writes  HSET of state (and close_reason, closed_at for a
--         closed shard, and paused 1 when ARGV[3] is 1), HDEL of rebuild_token,
--         rebuild_from and rebuild_swapped;
--         HSETNX of the blocked hash's placeholder '' and HSET of blocked in meta,
--         the users the hash holds (as activate.lua and block.lua keep them: a shard
--         that lost its meta and kept the hash still refuses those users).
-- Complexity O(1). A rebuild activates every other shard first and the root last, as a
-- create does: until the root is live the campaign is not found. A rebuild cut short
-- is run again whole, under a new token. The pause is written in the same call that
-- makes the shard live, so no grab runs on it unpaused in between.
local meta, blocked = KEYS[1], KEYS[2]
local token, state, paused = ARGV[1], ARGV[2], ARGV[3]
local m = redis.call('HMGET', meta, 'state', 'rebuild_token', 'rebuild_swapped')
if m[1] ~= 'loading' or m[2] ~= token or m[3] ~= token then
  return redis.error_reply('HBSTALE another rebuild took over, or this one has not swapped the shard')
end
if state ~= 'scheduled' and state ~= 'open' and state ~= 'closed' then
  return redis.error_reply('HBARGS state ' .. tostring(state))
end
if paused ~= '0' and paused ~= '1' then
  return redis.error_reply('HBARGS paused ' .. tostring(paused))
end
if state == 'closed' and (not ARGV[4] or ARGV[4] == '' or not ARGV[5]) then
  return redis.error_reply('HBARGS a closed shard needs its close reason and time')
end
if state == 'closed' then
  redis.call('HSET', meta, 'close_reason', ARGV[4], 'closed_at', ARGV[5])
end
if paused == '1' then
  redis.call('HSET', meta, 'paused', '1')
end
redis.call('HSET', meta, 'state', state)
redis.call('HDEL', meta, 'rebuild_token', 'rebuild_from', 'rebuild_swapped')
redis.call('HSETNX', blocked, '', '0')
redis.call('HSET', meta, 'blocked', redis.call('HLEN', blocked) - 1)
return state
