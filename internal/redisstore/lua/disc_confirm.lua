#!lua
-- disc_confirm.lua: make the reservations of a batch of orders final on one shard of
-- a discount campaign, and journal them for settlement.
-- KEYS[1] meta  KEYS[2] reservations  KEYS[3] confirms stream
-- ARGV[1] the campaign's shard count as the caller knows it
-- ARGV[2..] pairs user, order id (1 <= n <= 1000 pairs); a pair may repeat
-- Reply   4n integers, four per pair in ARGV order: code, seq, cents, expires_ms.
--         Codes: 1 CONFIRMED now; 2 ALREADY confirmed (the same seq and cents);
--         6 NO_CAMPAIGN; 9 CANCELLED; 10 EXPIRED (by the Redis clock, reaped or not);
--         11 NOT_FOUND (the user holds no reservation of that order here). seq,
--         cents and expires_ms are 0 unless the code is 1 or 2.
-- Errors  HBBATCH batch size out of range; HBSHARDS <count> the campaign has another
--         shard count than ARGV[1]; HBCORRUPT a record that cannot be read. All raised
--         before any write.
-- Writes  when some are confirmed now: one HSET of their records (state c), one XADD
--         of the batch to the confirms stream (field
--         "<user>/<order>", value "<seq>:<cents>"), HINCRBY of reserved_count and
--         reserved_cents (down) and confirmed_count and confirmed_cents (up) in meta.
-- Complexity O(n), with a constant number of Redis commands per batch.
-- The holds list keeps the confirmed order's entry: the reaper drops it when it comes
-- due (a removal from the middle of a list would cost O(holds) here).
-- A reservation past its expiry is answered EXPIRED and left to the reaper, which
-- returns its amount: a confirm never writes a release, so a release is one script.
local meta, resv, confirms = KEYS[1], KEYS[2], KEYS[3]
--@include outcomes.lua
--@include disc_batch.lua
--@include disc_record.lua
local stop, n, _, out, answer = disc_batch(2, 'pairs of user, order', meta)
if stop then
  return stop
end
local keys = {}
for i = 1, n do
  keys[i] = ARGV[2 * i] .. '/' .. ARGV[2 * i + 1]
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local recs = redis.call('HMGET', resv, unpack(keys))

local done, sets, entry = {}, {}, {}
local count, cents_sum = 0, 0
for i = 1, n do
  local rec = done[keys[i]] or recs[i]
  if not rec then
    answer(i, NOT_FOUND, 0, 0, 0)
  else
    local st, seq, a, cents, exp, oc = string.match(rec, RECORD)
    if not st then
      return redis.error_reply('HBCORRUPT record of ' .. keys[i])
    end
    if st == 'c' then
      answer(i, ALREADY, tonumber(seq), tonumber(cents), tonumber(exp))
    elseif st == 'x' then
      answer(i, CANCELLED, 0, 0, 0)
    elseif st == 'e' or now >= tonumber(exp) then
      answer(i, EXPIRED, 0, 0, 0)
    else
      rec = string.format(RECORD_FORMAT, 'c', seq, tonumber(a), tonumber(cents), exp, oc)
      done[keys[i]] = rec
      sets[#sets + 1], sets[#sets + 2] = keys[i], rec
      entry[#entry + 1], entry[#entry + 2] = keys[i], seq .. ':' .. cents
      count, cents_sum = count + 1, cents_sum + tonumber(cents)
      answer(i, OK, tonumber(seq), tonumber(cents), tonumber(exp))
    end
  end
end

if count > 0 then
  redis.call('HSET', resv, unpack(sets))
  redis.call('XADD', confirms, '*', unpack(entry))
  redis.call('HINCRBY', meta, 'reserved_count', -count)
  redis.call('HINCRBY', meta, 'reserved_cents', string.format('%d', -cents_sum))
  redis.call('HINCRBY', meta, 'confirmed_count', count)
  redis.call('HINCRBY', meta, 'confirmed_cents', string.format('%d', cents_sum))
end
return out
