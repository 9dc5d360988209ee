#!lua
-- settle.lua: record a closed campaign's refund in Redis and mark it settled (for a
-- sharded campaign: one shard's part of the refund, what its pool holds).
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] xfers
-- ARGV[1] refunded cents: total - granted, as recorded in the ledger; for a shard,
--         base_cents + in_cents - out_cents - granted_cents
-- Reply   {state, refunded_cents, changed}; changed is 0 when it was settled
--         already (several workers may finish the same campaign)
-- Errors  HBNOCAMPAIGN no such campaign; HBSTATE not closed, or a transfer out of
--         this shard is still in flight; HBSUM the refund is not what the pool holds
-- Writes  when closed and the refund matches: UNLINK of the pool, HSET of state
--         settled and refunded_cents.
-- Complexity O(1) (the pool is unlinked, freed in the background).
-- The pool leaves Redis in the same step as refunded_cents is set, so
-- total = granted + pool + refunded holds before and after.
local meta, pool, xfers = KEYS[1], KEYS[2], KEYS[3]
--@include meta.lua
--@include refund.lua
local m, err = live_meta(meta, 'campaign', 'total', 'granted_cents', 'refunded_cents',
  'base_cents', 'in_cents', 'out_cents')
if not m then
  return err
end
local stop = refund_gate('campaign', m[1], m[4], false, xfers)
if stop then
  return stop
end
local held = tonumber(m[5] or m[2]) + tonumber(m[6] or '0') - tonumber(m[7] or '0') - tonumber(m[3])
if held ~= tonumber(ARGV[1]) then
  return redis.error_reply('HBSUM refund ' .. ARGV[1] .. ' is not what the pool holds, ' .. string.format('%d', held))
end
redis.call('UNLINK', pool)
redis.call('HSET', meta, 'state', 'settled', 'refunded_cents', ARGV[1])
return {'settled', ARGV[1], 1}
