#!lua
-- rebuild_swap.lua: put a rebuilt shard in place of what was left of it, in one step.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] claims  KEYS[4] grants  KEYS[5] xfers
-- KEYS[6] applied  KEYS[7] lost  KEYS[8] staged pool  KEYS[9] staged claims
-- KEYS[10] staged grants  KEYS[11] staged lost
-- ARGV[1] rebuild token  ARGV[2] ledger fence (ledger.Ledger.Fence, raised by this
--         rebuild before it read the ledger; a positive integer)
-- ARGV[3..] field, value pairs: the whole new meta (state stays loading)
-- Reply   1 when swapped now, 0 when this token swapped it before
-- Errors  HBSTALE another rebuild took over, or none froze the shard; HBARGS odd
--         field list, or a ledger fence that is not a positive integer
-- Writes  unless swapped before: DEL of meta, pool, claims, grants, xfers, applied and
--         lost; RENAME of each staged key that exists to its place, then PERSIST (the
--         staged keys expire, in case a rebuild dies); XGROUP CREATE of the settle group
--         at 0 (MKSTREAM); HSET of meta: the given fields, state loading,
--         rebuild_token and rebuild_swapped (the token), ledger_fence (the fence).
-- Complexity O(fields) plus freeing what was left (DEL of the old keys).
-- Everything the rebuild read is replaced at once, so a grab never sees half of it;
-- the dead stream is kept for an operator. The settlement worker passes ledger_fence
-- with every ledger write of the campaign: a batch it read before the rebuild carries
-- an older one, which the ledger refuses. The staged keys live in the shard's slot
-- and carry the token in their names, so two rebuilds never mix their staging.
local meta, pool, claims, grants, xfers, applied, lost = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local token, fence = ARGV[1], ARGV[2]
local m = redis.call('HMGET', meta, 'state', 'rebuild_token', 'rebuild_swapped')
if m[1] ~= 'loading' or m[2] ~= token then
  return redis.error_reply('HBSTALE another rebuild took over, or none froze the shard')
end
if m[3] == token then
  return 0
end
if #ARGV < 2 or #ARGV % 2 ~= 0 then
  return redis.error_reply('HBARGS meta fields must come in pairs')
end
if not string.match(fence, '^[1-9][0-9]*$') or #fence > 18 then
  return redis.error_reply('HBARGS ledger fence ' .. tostring(fence))
end
redis.call('DEL', meta, pool, claims, grants, xfers, applied, lost)
local live = {pool, claims, grants, lost}
for i = 8, 11 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('RENAME', KEYS[i], live[i - 7])
    redis.call('PERSIST', live[i - 7])
  end
end
redis.call('XGROUP', 'CREATE', grants, 'settle', '0', 'MKSTREAM')
if #ARGV > 2 then
  redis.call('HSET', meta, unpack(ARGV, 3))
end
redis.call('HSET', meta, 'state', 'loading', 'rebuild_token', token, 'rebuild_swapped', token, 'ledger_fence', fence)
return 1
