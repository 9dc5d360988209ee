#!lua
-- owner.lua: claim, or change, the owner of a campaign (of a discount campaign): the
-- identity of the ledger or sink it settles into.
-- KEYS[1] the root's meta
-- ARGV[1] the owner the caller expects now ('' for none: a claim)
-- ARGV[2] the new owner (not empty)
-- ARGV[3] why ('' for a claim by a settlement worker; an operator's reason otherwise)
-- Reply   {1, owner} the campaign is owned by ARGV[2] now (this call wrote it, or it
--         already was); {0, owner} it is owned by another than ARGV[1]: nothing written
-- Errors  HBNOCAMPAIGN no such campaign, or still loading; HBARGS an empty new owner
-- Writes  when the owner is ARGV[1] and not ARGV[2]: HSET of owner, and of owner_prev,
--         owner_reason and owner_changed_at (the Redis clock, ms) when ARGV[3] is not
--         empty.
-- Complexity O(1). A compare-and-set: of several calls expecting the same owner, one
-- changes it and the others see the new owner, so two settlement workers can never
-- both claim one campaign.
local meta = KEYS[1]
local expect, owner, why = ARGV[1], ARGV[2], ARGV[3]
--@include meta.lua
if not owner or owner == '' then
  return redis.error_reply('HBARGS the new owner is empty')
end
local m, err = live_meta(meta, 'campaign', 'owner')
if not m then
  return err
end
local now = m[2] or ''
if now == owner then
  return {1, now}
end
if now ~= expect then
  return {0, now}
end
redis.call('HSET', meta, 'owner', owner)
if why ~= '' then
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', meta, 'owner_prev', now, 'owner_reason', why, 'owner_changed_at', string.format('%d', ms))
end
return {1, owner}
