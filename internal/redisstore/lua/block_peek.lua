#!lua flags=no-writes
-- block_peek.lua: the packets of the next block of a shard's pool to open.
-- KEYS[1] meta  KEYS[2] pool
-- ARGV[1] block size (1..100000)  ARGV[2] low: only when the opened part holds fewer
--         packets than this (1: only when it is empty)
-- Reply   the block's packets, "<seq>:<cents>" each, as they lie in the pool: the last
--         min(size, sealed) packets of the sealed part (the pool's head holds meta's
--         sealed packets, next to the opened part); {} when nothing is sealed or the
--         opened part holds low packets or more
-- Errors  HBARGS a size out of range; HBNOCAMPAIGN the shard does not exist or is loading
-- Writes  none (read-only)
-- Complexity O(size). The engine records the block in the ledger (the durable pop
-- frontier), then opens it with block_open.lua, which checks that the block is still
-- what this script read.
local meta, pool = KEYS[1], KEYS[2]
local size, low = tonumber(ARGV[1]), tonumber(ARGV[2])
--@include blocks.lua
if not size or size < 1 or size > 100000 or not low then
  return redis.error_reply('HBARGS block size ' .. tostring(ARGV[1]) .. ', low ' .. tostring(ARGV[2]))
end
local len, sealed, err = frontier(meta, pool)
if not len then
  return err
end
if sealed <= 0 or len - sealed >= low then
  return {}
end
return redis.call('LRANGE', pool, math.max(sealed - size, 0), sealed - 1)
