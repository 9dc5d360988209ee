#!lua
-- pause.lua: pause or resume the grabs of one shard of a campaign (the reserves of a
-- discount campaign's shard).
-- KEYS[1] meta
-- ARGV[1] 1 to pause, 0 to resume
-- Reply   {state, paused, changed}: the shard's state, 1 when it is paused after the
--         call, and changed 1 when this call paused or resumed it (both are idempotent)
-- Errors  HBNOCAMPAIGN no such campaign, or still loading; HBARGS ARGV[1] not 0 or 1
-- Writes  when it changes: HSET of paused 1 in meta, or HDEL of paused.
-- Complexity O(1). grab.lua and disc_reserve.lua read paused in the same HMGET as the
-- state, so a grab that runs after this call sees it. The window and close still
-- apply: a paused campaign closes on time, and closing one works.
local meta = KEYS[1]
local want = ARGV[1]
--@include meta.lua
if want ~= '0' and want ~= '1' then
  return redis.error_reply('HBARGS want 0 or 1, not ' .. tostring(want))
end
local m, err = live_meta(meta, 'campaign', 'paused')
if not m then
  return err
end
local state = m[1]
local was = m[2] or '0'
if was == want then
  return {state, tonumber(want), 0}
end
if want == '1' then
  redis.call('HSET', meta, 'paused', '1')
else
  redis.call('HDEL', meta, 'paused')
end
return {state, tonumber(want), 1}
