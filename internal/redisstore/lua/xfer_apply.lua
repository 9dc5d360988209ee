#!lua
-- xfer_apply.lua: step 2 of a transfer: add a transfer's packets to the
-- destination shard's pool, once, and remember what was added.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] applied (hash: transfer id -> "<count>:<cents>:<sha1>")
-- ARGV[1] transfer id  ARGV[2..] packets "<seq>:<cents>" (1..3000)
-- Reply   the number of packets added; 0 when this transfer was applied before with
--         the same packets
-- Errors  HBNOCAMPAIGN no such shard, or still loading; HBSTATE the shard is settled;
--         HBARGS no packets or too many; HBAMOUNT an entry that is not "<seq>:<cents>";
--         HBXCONFLICT the id was applied before with other packets (count, cents or
--         the SHA-1 of the packet list differ); HBXSTALE the id was taken under another
--         rebuild's fence than the shard's ledger_fence ("@<fence>" at its end, none: 0):
--         a rebuild since placed its packets and deleted its record. All before any write.
-- Writes  RPUSH of the packets to the pool tail (where grabs take from), or, under the
--         pop frontier (meta has block), LPUSH to the head and HINCRBY of sealed: they
--         are opened (recorded in the ledger) before any is popped; HSET of the id's
--         fingerprint in applied, HINCRBY of in_count and in_cents
-- Complexity O(packets). The applied hash makes a second apply (a retry, or the
-- recovery pass resolving a record whose first apply went through) a no-op, and
-- a second apply of the id with other packets an error: ids are random, so that
-- is a fault (an id drawn twice, a record altered), and skipping it would drop
-- its packets.
local meta, pool, applied = KEYS[1], KEYS[2], KEYS[3]
local xid = ARGV[1]
local n = #ARGV - 1
--@include meta.lua

if n < 1 or n > 3000 then
  return redis.error_reply('HBARGS want 1..3000 packets')
end
local mf, err = live_meta(meta, 'shard', 'ledger_fence')
if not mf then
  return err
end
local state = mf[1]
local took = string.match(xid, '@(%d+)$') or '0'
if took ~= (mf[2] or '0') then
  return redis.error_reply('HBXSTALE transfer ' .. xid .. ' was taken under fence ' .. took ..
    ', the shard is at ' .. (mf[2] or '0'))
end
local sum = 0
for i = 2, #ARGV do
  local c = tonumber(string.match(ARGV[i], '^%d+:(%d+)$'))
  if not c or c < 1 then
    return redis.error_reply('HBAMOUNT packet ' .. ARGV[i])
  end
  sum = sum + c
end
local fp = n .. ':' .. string.format('%d', sum) .. ':' .. redis.sha1hex(table.concat(ARGV, ',', 2))
local had = redis.call('HGET', applied, xid)
if had then
  if had ~= fp then
    return redis.error_reply('HBXCONFLICT transfer ' .. xid .. ' was applied as ' .. had .. ', not ' .. fp)
  end
  return 0
end
if state == 'settled' then
  return redis.error_reply('HBSTATE the shard is settled')
end
-- Under the pop frontier (meta's block) the packets join the sealed head: the
-- destination opens them, recorded in the ledger, before popping any.
if redis.call('HEXISTS', meta, 'block') == 1 then
  redis.call('LPUSH', pool, unpack(ARGV, 2))
  redis.call('HINCRBY', meta, 'sealed', n)
else
  redis.call('RPUSH', pool, unpack(ARGV, 2))
end
redis.call('HSET', applied, xid, fp)
redis.call('HINCRBY', meta, 'in_count', n)
redis.call('HINCRBY', meta, 'in_cents', string.format('%d', sum))
return n
