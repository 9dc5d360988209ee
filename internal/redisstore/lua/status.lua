#!lua flags=no-writes
-- status.lua: a consistent snapshot of a campaign.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] xfers
-- ARGV    none
-- Reply   {now_ms, pool_len, transfers_out, field1, value1, field2, value2, ...} (all
--         of meta; transfers_out counts the transfer records in flight from this
--         shard); pool_len is -1 and there are no fields when the campaign does not
--         exist.
-- Errors  none
-- Writes  none (read-only)
-- Complexity O(fields of meta). Read-only, so it runs on a replica and under OOM.
local meta, pool, xfers = KEYS[1], KEYS[2], KEYS[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields = redis.call('HGETALL', meta)
if #fields == 0 then
  return {now, -1, 0}
end
local out = {now, redis.call('LLEN', pool), redis.call('HLEN', xfers)}
for i = 1, #fields do
  out[i + 3] = fields[i]
end
return out
