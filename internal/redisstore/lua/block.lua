#!lua
-- block.lua: add users to, or remove them from, the blocked users of one shard of a
-- campaign or a discount campaign (the shard the users are homed on).
-- KEYS[1] meta  KEYS[2] blocked users
-- ARGV[1] 1 to block, 0 to unblock
-- ARGV[2..n+1] user ids (1 <= n <= 1000); a user may appear more than once
-- Reply   {changed, size}: how many users this call added (removed), and how many
--         the shard blocks after it
-- Errors  HBNOCAMPAIGN no such campaign, or still loading; HBARGS ARGV[1] not 0 or 1,
--         a batch size out of range or an empty user id. All raised before any write.
-- Writes  HSET of each user -> the Redis clock in ms (the first block is kept), or
--         HDEL; HSETNX of the placeholder field '' (activate.lua writes it; a
--         campaign activated before it did gets it here), which keeps the hash in
--         existence; then HSET of blocked in meta, the users in the hash, which
--         grab.lua and disc_reserve.lua read to skip the hash while it is 0.
-- Complexity O(n).
local meta, blocked = KEYS[1], KEYS[2]
local add = ARGV[1]
local n = #ARGV - 1
--@include meta.lua
if add ~= '0' and add ~= '1' then
  return redis.error_reply('HBARGS want 0 or 1, not ' .. tostring(add))
end
if n < 1 or n > 1000 then
  return redis.error_reply('HBARGS batch of ' .. n .. ' users, want 1..1000')
end
for i = 2, n + 1 do
  if ARGV[i] == '' then
    return redis.error_reply('HBARGS an empty user id')
  end
end
local live, err = live_meta(meta, 'campaign')
if not live then
  return err
end
local changed = 0
redis.call('HSETNX', blocked, '', '0')
if add == '1' then
  local t = redis.call('TIME')
  local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  for i = 2, n + 1 do
    changed = changed + redis.call('HSETNX', blocked, ARGV[i], now)
  end
else
  changed = redis.call('HDEL', blocked, unpack(ARGV, 2))
end
local size = redis.call('HLEN', blocked) - 1
redis.call('HSET', meta, 'blocked', size)
return {changed, size}
