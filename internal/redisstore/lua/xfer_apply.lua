#!lua
-- xfer_apply.lua: step 2 of a transfer: add a transfer's packets to the
-- destination shard's pool, once.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] applied (set of transfer ids received)
-- ARGV[1] transfer id  ARGV[2..] packets "<seq>:<cents>" (1..3000)
-- Reply   the number of packets added; 0 when this transfer was applied before
-- Errors  HBNOCAMPAIGN no such shard, or still loading; HBSTATE the shard is settled;
--         HBARGS no packets or too many; HBAMOUNT an entry that is not "<seq>:<cents>".
--         All before any write.
-- Writes  RPUSH of the packets to the pool tail (where grabs take from), or, under the
--         pop frontier (meta has block), LPUSH to the head and HINCRBY of sealed: they
--         are opened (recorded in the ledger) before any is popped; SADD of the id,
--         HINCRBY of in_count and in_cents
-- Complexity O(packets). The applied set makes a second apply (a retry, or the
-- recovery pass resolving a record whose first apply went through) a no-op.
local meta, pool, applied = KEYS[1], KEYS[2], KEYS[3]
local xid = ARGV[1]
local n = #ARGV - 1

if n < 1 or n > 3000 then
  return redis.error_reply('HBARGS want 1..3000 packets')
end
local state = redis.call('HGET', meta, 'state')
if not state or state == 'loading' then
  return redis.error_reply('HBNOCAMPAIGN no such shard')
end
if redis.call('SISMEMBER', applied, xid) == 1 then
  return 0
end
if state == 'settled' then
  return redis.error_reply('HBSTATE the shard is settled')
end
local sum = 0
for i = 2, #ARGV do
  local c = tonumber(string.match(ARGV[i], '^%d+:(%d+)$'))
  if not c or c < 1 then
    return redis.error_reply('HBAMOUNT packet ' .. ARGV[i])
  end
  sum = sum + c
end
-- Under the pop frontier (meta's block) the packets join the sealed head: the
-- destination opens them, recorded in the ledger, before popping any.
if redis.call('HEXISTS', meta, 'block') == 1 then
  redis.call('LPUSH', pool, unpack(ARGV, 2))
  redis.call('HINCRBY', meta, 'sealed', n)
else
  redis.call('RPUSH', pool, unpack(ARGV, 2))
end
redis.call('SADD', applied, xid)
redis.call('HINCRBY', meta, 'in_count', n)
redis.call('HINCRBY', meta, 'in_cents', string.format('%d', sum))
return n
