#!lua
-- disc_cancel.lua: cancel the reservations of a batch of orders on one shard of a
-- discount campaign: each amount goes back to the head of the pool as one unit of
-- quota and the user's usage goes down by it.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] usage  KEYS[4] reservations
-- ARGV[1] the campaign's shard count as the caller knows it
-- ARGV[2..] pairs user, order id (1 <= n <= 1000 pairs); a pair may repeat
-- Reply   4n integers, four per pair in ARGV order: code, seq, cents, 0.
--         Codes: 1 CANCELLED now; 2 ALREADY cancelled; 6 NO_CAMPAIGN; 10 EXPIRED
--         (before, or found past its expiry by the Redis clock and released now as
--         expired); 11 NOT_FOUND; 12 CONFIRMED (too late to cancel). seq and cents
--         are those of the reservation for codes 1, 2, 10 and 12, else 0.
-- Errors  HBBATCH batch size out of range; HBSHARDS <count> the campaign has another
--         shard count than ARGV[1]; HBCORRUPT a record or usage that cannot be read.
--         All raised before any write.
-- Writes  for each reservation released now: LPUSH of "<seq>:<r>" to the pool, with
--         r = min(cents, the amount first taken from the pool), the rest added to
--         comp_cents; the user's usage down (HDEL at zero); the record's state x (or
--         e); HINCRBY of reserved_count, reserved_cents and returned_cents (what went
--         back to the pool) in meta. The hold's entry stays in the holds list until
--         the reaper drops it.
-- Complexity O(n).
-- The amount returns to the pool, not to compensation (lib/disc_release.lua says why).
local meta, pool, usage, resv = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@include outcomes.lua
--@include disc_batch.lua
--@include disc_record.lua
--@include disc_release.lua
local stop, n, _, out, answer = disc_batch(2, 'pairs of user, order', meta)
if stop then
  return stop
end
local keys, parsed, users = {}, {}, {}
for i = 1, n do
  keys[i] = ARGV[2 * i] .. '/' .. ARGV[2 * i + 1]
end
local recs = redis.call('HMGET', resv, unpack(keys))
-- One table per order, so an order twice in the batch is released once.
local byKey = {}
for i = 1, n do
  if byKey[keys[i]] then
    parsed[i] = byKey[keys[i]]
  elseif recs[i] then
    local st, seq, a, d, exp, oc = string.match(recs[i], RECORD)
    if not st then
      return redis.error_reply('HBCORRUPT record of ' .. keys[i])
    end
    parsed[i] = {st, seq, tonumber(a), tonumber(d), exp, oc}
    byKey[keys[i]] = parsed[i]
    if st == 'r' then
      users[#users + 1] = ARGV[2 * i]
    end
  end
end
-- The usage of the users who may release, read and checked before any write.
local used, err = usage_of(usage, users)
if not used then
  return err
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local release, finish = releaser(meta, pool, usage, resv, used)

for i = 1, n do
  local p = parsed[i]
  if not p then
    answer(i, NOT_FOUND, 0, 0)
  elseif p[1] == 'r' then
    local st, code = 'x', OK
    if now >= tonumber(p[5]) then
      st, code = 'e', EXPIRED
    end
    release(keys[i], ARGV[2 * i], p, st)
    p[1] = st
    answer(i, code, tonumber(p[2]), p[4])
  elseif p[1] == 'c' then
    answer(i, CONFIRMED, tonumber(p[2]), p[4])
  elseif p[1] == 'x' then
    answer(i, ALREADY, tonumber(p[2]), p[4])
  else
    answer(i, EXPIRED, tonumber(p[2]), p[4])
  end
end
finish()
return out
