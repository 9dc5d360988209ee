#!lua
-- disc_settle.lua: record the refund of one closed shard of a discount campaign (what
-- its pool and compensation hold) and mark it settled.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] xfers  KEYS[4] holds
-- ARGV[1] refunded cents: base_cents + in_cents - out_cents - confirmed_cents, as the
--         ledger recorded the refund
-- Reply   {state, refunded_cents, changed}; changed is 0 when it was settled already
-- Errors  HBNOCAMPAIGN no such shard; HBSTATE not closed, a reservation still held,
--         or a transfer out of this shard in flight; HBSUM the refund is not what
--         the shard holds
-- Writes  when closed, with nothing reserved or in flight and the refund matching:
--         UNLINK of the pool and of the holds left (of orders confirmed or
--         cancelled), HSET of state settled, refunded_cents and comp_cents 0.
-- Complexity O(1) (the pool is unlinked, freed in the background).
-- The pool and compensation leave in the same step as refunded_cents is set, so
-- base + in - out = confirmed + reserved + pool + compensation + refunded holds
-- before and after.
local meta, pool, xfers, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@include meta.lua
--@include refund.lua
local m, err = live_meta(meta, 'shard', 'refunded_cents', 'base_cents', 'in_cents', 'out_cents',
  'confirmed_cents', 'reserved_count')
if not m then
  return err
end
local stop = refund_gate('shard', m[1], m[2], tonumber(m[7] or '0') > 0 and 'reservations are still held', xfers)
if stop then
  return stop
end
local held = tonumber(m[3]) + tonumber(m[4] or '0') - tonumber(m[5] or '0') - tonumber(m[6] or '0')
if held ~= tonumber(ARGV[1]) then
  return redis.error_reply('HBSUM refund ' .. ARGV[1] .. ' is not what the shard holds, ' .. string.format('%d', held))
end
redis.call('UNLINK', pool, holds)
redis.call('HSET', meta, 'state', 'settled', 'refunded_cents', ARGV[1], 'comp_cents', 0)
return {'settled', ARGV[1], 1}
