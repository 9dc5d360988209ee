#!lua
-- block_open.lua: open the next block of a shard's pool for grabs (move the pop frontier).
-- KEYS[1] meta  KEYS[2] pool
-- ARGV[1] the block's packet count n  ARGV[2] SHA-1 (hex) of its packets joined by ','
--         in pool order, as block_peek.lua read them  ARGV[3] low, as block_peek.lua's
-- Reply   1 when opened now; 0 when the block is no longer the next one (another engine
--         opened it, a transfer took some of it, a rebuild rewrote the shard) or the
--         opened part holds low packets or more: nothing written
-- Errors  HBARGS a count that is not a positive integer; HBNOCAMPAIGN the shard does not
--         exist or is loading
-- Writes  HINCRBY of meta's sealed by -n
-- Complexity O(n) (the check reads the block). The caller recorded exactly these
-- packets in the ledger (ledger.BlockRecorder) before this call: no packet is popped
-- unless the ledger knows its block was opened, so after a loss of Redis a rebuild
-- quarantines at most the opened blocks' packets nobody is known to hold and puts
-- every other packet back.
local meta, pool = KEYS[1], KEYS[2]
local n, low = tonumber(ARGV[1]), tonumber(ARGV[3])
--@include blocks.lua
if not n or n < 1 or n ~= math.floor(n) or not low then
  return redis.error_reply('HBARGS block count ' .. tostring(ARGV[1]) .. ', low ' .. tostring(ARGV[3]))
end
local len, sealed, err = frontier(meta, pool)
if not len then
  return err
end
if sealed < n or len - sealed >= low then
  return 0
end
local got = redis.call('LRANGE', pool, sealed - n, sealed - 1)
if redis.sha1hex(table.concat(got, ',')) ~= ARGV[2] then
  return 0
end
redis.call('HINCRBY', meta, 'sealed', -n)
return 1
