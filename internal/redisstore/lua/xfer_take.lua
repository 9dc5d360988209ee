#!lua
-- xfer_take.lua: step 1 of a transfer: take packets out of a shard's pool into a
-- transfer record kept in the same slot.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] xfers (hash: transfer id -> record)
-- ARGV[1] destination shard  ARGV[2] most packets to take (1..3000)
-- ARGV[3] the transfer's nonce: 16..64 hex digits, drawn at random by the caller
-- Reply   {xid, packet, packet, ...}: the transfer's id "<shard>-<nonce>" (with
--         "@<fence>" after it when meta holds a ledger_fence a rebuild wrote) and the
--         packets taken from the head of the pool; {} when the pool is empty or the
--         shard is not open or scheduled (closed and settled shards lend nothing)
-- Errors  HBNOCAMPAIGN no such shard, or still loading; HBARGS bad count or nonce, or
--         a record of this id exists already;
--         HBCORRUPT a pool entry that is not "<seq>:<cents>". All before any write.
-- Writes  LTRIM (or DEL) of the pool head, one HSET of the record
--         "<dest>|<ms>|<packet>,<packet>,...", HINCRBY of out_count, out_cents;
--         HSET of meta's sealed less the packets taken (the head is the sealed part of
--         the pop frontier), when some are sealed
-- Complexity O(packets taken). The packets are in the record from the moment they
-- leave the pool, so conservation counts them (pool + claims + records in flight).
-- The id is random, not a counter of the shard's: a replica promoted after missing a
-- finished transfer would hand its id out again, and the destination, which applied
-- it, would refuse the new one (xfer_apply.lua). The fence in the id is the rebuild
-- the take ran under: a rebuild reads the records, places their packets and deletes
-- them, so xfer_apply.lua refuses an id whose fence is not its shard's (an apply in
-- hand across a rebuild would put the packets in a pool a second time).
local meta, pool, xfers = KEYS[1], KEYS[2], KEYS[3]
local dest, want, nonce = ARGV[1], tonumber(ARGV[2]), ARGV[3] or ''
--@include meta.lua

if not want or want < 1 or want > 3000 or not string.match(dest, '^%d+$') then
  return redis.error_reply('HBARGS want a destination shard and a count in 1..3000')
end
if #nonce < 16 or #nonce > 64 or not string.match(nonce, '^%x+$') then
  return redis.error_reply('HBARGS want a nonce of 16..64 hex digits')
end
local m, err = live_meta(meta, 'shard', 'shard', 'ledger_fence')
if not m then
  return err
end
local xid = (m[2] or '0') .. '-' .. nonce
if m[3] and m[3] ~= '0' then
  xid = xid .. '@' .. m[3]
end
if redis.call('HEXISTS', xfers, xid) == 1 then
  return redis.error_reply('HBARGS transfer ' .. xid .. ' exists already')
end
if m[1] ~= 'open' and m[1] ~= 'scheduled' then
  return {}
end
local len = redis.call('LLEN', pool)
local k = math.min(want, len)
if k == 0 then
  return {}
end
local got = redis.call('LRANGE', pool, 0, k - 1)
local sum = 0
for i = 1, k do
  local c = tonumber(string.match(got[i], '^%d+:(%d+)$'))
  if not c then
    return redis.error_reply('HBCORRUPT pool entry ' .. got[i])
  end
  sum = sum + c
end
if k == len then
  redis.call('DEL', pool)
else
  redis.call('LTRIM', pool, k, -1)
end
-- The sealed part is the head: what the take moves of it leaves it (as unopened).
local sealed = tonumber(redis.call('HGET', meta, 'sealed') or '0')
if sealed > 0 then
  redis.call('HSET', meta, 'sealed', math.max(sealed - k, 0))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', xfers, xid, dest .. '|' .. string.format('%d', now) .. '|' .. table.concat(got, ','))
redis.call('HINCRBY', meta, 'out_count', k)
redis.call('HINCRBY', meta, 'out_cents', string.format('%d', sum))
local out = {xid}
for i = 1, k do
  out[i + 1] = got[i]
end
return out
