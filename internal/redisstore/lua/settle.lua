#!lua
-- settle.lua: record a closed campaign's refund in Redis and mark it settled.
-- KEYS[1] meta  KEYS[2] pool
-- ARGV[1] refunded cents, as recorded in the ledger
-- Reply   {state, refunded_cents, changed}; changed is 0 when it was settled
--         already (several workers may finish the same campaign)
-- Errors  HBNOCAMPAIGN no such campaign; HBSTATE not closed; HBSUM the refund is
--         not total - granted
-- Writes  when closed and the refund matches: UNLINK of the pool, HSET of state
--         settled and refunded_cents.
-- Complexity O(1) (the pool is unlinked, freed in the background).
-- The pool leaves Redis in the same step as refunded_cents is set, so
-- total = granted + pool + refunded holds before and after.
local meta, pool = KEYS[1], KEYS[2]
local m = redis.call('HMGET', meta, 'state', 'total', 'granted_cents', 'refunded_cents')
if not m[1] or m[1] == 'loading' then
  return redis.error_reply('HBNOCAMPAIGN no such campaign')
end
if m[1] == 'settled' then
  return {'settled', m[4], 0}
end
if m[1] ~= 'closed' then
  return redis.error_reply('HBSTATE campaign is ' .. m[1] .. ', not closed')
end
if tonumber(m[2]) - tonumber(m[3]) ~= tonumber(ARGV[1]) then
  return redis.error_reply('HBSUM refund ' .. ARGV[1] .. ' is not total ' .. m[2] .. ' - granted ' .. m[3])
end
redis.call('UNLINK', pool)
redis.call('HSET', meta, 'state', 'settled', 'refunded_cents', ARGV[1])
return {'settled', ARGV[1], 1}
