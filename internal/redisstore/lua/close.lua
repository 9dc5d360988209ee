#!lua
-- close.lua: stop grabs of a campaign now, by an operator.
-- KEYS[1] meta
-- ARGV[1] who closes, for the record (for example 'operator')
-- Reply   {state, close_reason, changed}; changed is 1 when this call closed it,
--         0 when it was closed already (closing is idempotent)
-- Errors  HBNOCAMPAIGN no such campaign, or still loading
-- Writes  when scheduled or open: HSET of state closed, close_reason and closed_at.
-- Complexity O(1). A campaign closed before it opened is 'cancelled'; one whose
-- window has passed records 'time'.
local meta = KEYS[1]
--@include meta.lua
local m, err = live_meta(meta, 'campaign', 'opens_at', 'closes_at', 'close_reason')
if not m then
  return err
end
local state = m[1]
if state ~= 'scheduled' and state ~= 'open' then
  return {state, m[4] or '', 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reason = ARGV[1]
if now < tonumber(m[2]) then
  reason = 'cancelled'
elseif now >= tonumber(m[3]) then
  reason = 'time'
end
redis.call('HSET', meta, 'state', 'closed', 'close_reason', reason, 'closed_at', string.format('%d', now))
return {'closed', reason, 1}
