#!lua
-- pause.lua: pause or resume the grabs of one shard of a campaign (the reserves of a
-- discount campaign's shard), as one call (a generation) wants.
-- KEYS[1] meta
-- ARGV[1] 1 to pause, 0 to resume  ARGV[2] the call's generation (pause_gen.lua, a
--         positive integer)
-- Reply   {state, paused, changed, applied, newest}: the shard's state, 1 when it is
--         paused after the call, changed 1 when this call paused or resumed it, applied
--         1 when the generation is newer than the shard's pause_applied (0: a newer call
--         wrote the shard, or this one did before; nothing was written), and the
--         shard's pause_applied after the call
-- Errors  HBNOCAMPAIGN no such campaign, or still loading; HBARGS ARGV[1] not 0 or 1,
--         or a generation that is not a positive integer
-- Writes  when applied: HSET of pause_applied (the generation) and of paused 1 in meta,
--         or HDEL of paused.
-- Complexity O(1). grab.lua and disc_reserve.lua read paused in the same HMGET as the
-- state, so a grab that runs after this call sees it. The window and close still
-- apply: a paused campaign closes on time, and closing one works. Each call writes a
-- shard only if no newer call did: racing calls leave every shard as the one that
-- took its generation last wants.
local meta = KEYS[1]
local want, gen = ARGV[1], ARGV[2]
--@include meta.lua
if want ~= '0' and want ~= '1' then
  return redis.error_reply('HBARGS want 0 or 1, not ' .. tostring(want))
end
if not gen or not string.match(gen, '^[1-9][0-9]*$') or #gen > 15 then
  return redis.error_reply('HBARGS pause generation ' .. tostring(gen))
end
local m, err = live_meta(meta, 'campaign', 'paused', 'pause_applied')
if not m then
  return err
end
local state = m[1]
local was = m[2] or '0'
if tonumber(gen) <= tonumber(m[3] or '0') then
  return {state, tonumber(was), 0, 0, tonumber(m[3])}
end
if want == '1' then
  redis.call('HSET', meta, 'paused', '1', 'pause_applied', gen)
else
  redis.call('HSET', meta, 'pause_applied', gen)
  redis.call('HDEL', meta, 'paused')
end
local changed = 0
if was ~= want then
  changed = 1
end
return {state, tonumber(want), changed, 1, tonumber(gen)}
