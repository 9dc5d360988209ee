#!lua
-- load.lua: append one chunk of packets to a loading campaign's staging list.
-- KEYS[1] meta  KEYS[2] staging
-- ARGV[1] load token  ARGV[2] packets staged before this chunk
-- ARGV[3..] packets "<seq>:<cents>", in seq order, continuing from the staged ones:
--         packet p (0-based over the whole load) has seq shard + 1 + p * shards, with
--         shard and shards from meta (0 and 1 when absent: seqs 1, 2, 3, ...)
-- Reply   packets staged after this chunk
-- Errors  HBSTALE another loader took over or the campaign is not loading;
--         HBOFFSET chunk out of order; HBAMOUNT an entry that is not "<seq>:<cents>"
--         with the next seq and a positive amount
-- Writes  for a chunk that is not empty: RPUSH of its packets to staging, HINCRBY of
--         staged_cents and staged_count in meta; at the root (meta has load_lease), HSET
--         of load_until: every chunk renews the load's hold on the campaign.
-- Complexity O(chunk). Chunks are at most a few thousand entries (Lua's unpack limit is ~8000).
-- The offset and seq checks keep the list in seq order, one entry per seq; the
-- staged sum is counted from what is pushed, so activation checks the real contents.
-- Numbers go back to Redis through string.format('%d'): a bare Lua number may be
-- printed with 14 significant digits, which would round sums near 2^53.
local meta, staging = KEYS[1], KEYS[2]
local token, offset = ARGV[1], tonumber(ARGV[2])
--@include loader.lua

local m = redis.call('HMGET', meta, 'state', 'load_token', 'staged_count', 'shard', 'shards', 'load_lease')
if m[1] ~= 'loading' or m[2] ~= token then
  return redis.error_reply('HBSTALE the load was superseded or the campaign is not loading')
end
if tonumber(m[3]) ~= offset then
  return redis.error_reply('HBOFFSET chunk starts at ' .. ARGV[2] .. ' but ' .. m[3] .. ' are staged')
end
local first, stride = tonumber(m[4] or '0') + 1, tonumber(m[5] or '1')
local sum = 0
for i = 3, #ARGV do
  local seq, cents = string.match(ARGV[i], '^(%d+):(%d+)$')
  seq, cents = tonumber(seq), tonumber(cents)
  if not seq or seq ~= first + (offset + i - 3) * stride or cents < 1 then
    return redis.error_reply('HBAMOUNT packet ' .. ARGV[i] .. ' at position ' .. (offset + i - 2))
  end
  sum = sum + cents
end
local n = #ARGV - 2
if n == 0 then
  return offset
end
renew_hold(meta, m[6])
redis.call('RPUSH', staging, unpack(ARGV, 3))
redis.call('HINCRBY', meta, 'staged_cents', string.format('%d', sum))
return redis.call('HINCRBY', meta, 'staged_count', n)
