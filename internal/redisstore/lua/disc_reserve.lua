#!lua
-- disc_reserve.lua: reserve discounts for a batch of payments on one shard of a
-- discount campaign, each decided whole: the user's own earlier reservation of the
-- order, the open window, both per-user limits, an amount from the head of the pool
-- topped up from compensation up to max, clipped to what the user may still get and
-- to the order amount (the excess goes to compensation), the usage, the reservation
-- record and its expiry.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] usage  KEYS[4] reservations  KEYS[5] holds
-- KEYS[6] blocked users
-- ARGV[1] the campaign's shard count as the caller knows it
-- ARGV[2..] triples user, order id, order amount in cents (1 <= n <= 1000 triples);
--         the same user and order may appear more than once
-- Reply   4n integers, four per request in ARGV order: code, seq, cents, expires_ms.
--         Codes: 1 RESERVED now; 2 ALREADY (the order holds this reservation: the
--         same seq, cents and expiry); 12 CONFIRMED (the order's discount was
--         confirmed: its seq, cents and expiry); 3 EXHAUSTED (the pool
--         of a one-shard campaign is empty); 4 NOT_OPEN; 5 CLOSED; 6 NO_CAMPAIGN;
--         7 DRY (a shard of a sharded campaign is empty: the caller borrows from
--         another shard and asks again); 8 LIMIT (the user holds per_user_count
--         discounts, or per_user_amount cents, confirmed or reserved); 9 CANCELLED
--         and 10 EXPIRED (the order's reservation ended so; an order is reserved
--         once); 13 MISMATCH (the order holds a reservation, held or confirmed, made
--         for another order amount: the same order is one request, and its discount
--         may exceed this amount). A closed campaign answers 5, or 3 when it closed
--         because it was exhausted (close_reason exhausted), on every shard. A new
--         request (no record of its order) answers 14 PAUSED while meta's paused is 1
--         and the window is open, and 15 BLOCKED when its user is in the blocked hash
--         (read only while meta's blocked, the hash's size, is above 0). seq,
--         cents and expires_ms are 0 unless the code is 1, 2 or 12.
-- Errors  HBBATCH batch size out of range; HBSHARDS <count> the campaign has another
--         shard count than ARGV[1]; HBARGS an order amount that is not an integer
--         in 1..2^53-1; HBCORRUPT a pool entry, usage or record that cannot be read. All
--         raised before any write.
-- Writes  when some requests are reserved: LTRIM (or DEL) of the amounts taken from
--         the head of the pool, one HSET of the new records
--         "r|<seq>|<amount>|<cents>|<expires_ms>|<order_cents>", one RPUSH of their
--         holds "<expires_ms>|<user>/<order>" (in expiry order, the hold being the
--         same for all), one HSET of the users' usage "<count>:<cents>", HINCRBY of
--         reserved_count, reserved_cents and taken_cents (what left the pool) and
--         HSET of comp_cents in meta.
-- Complexity O(n), with a constant number of Redis commands per batch.
-- Usage counts confirmed and reserved discounts, so the limits hold at every moment.
-- Numbers go back to Redis through string.format('%d'): a bare Lua number may be
-- printed with 14 significant digits, which would round amounts near 2^53.
local meta, pool, usage, resv, holds, blocked = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
--@include outcomes.lua
--@include disc_batch.lua
--@include disc_record.lua
--@include window.lua
local stop, n, m, out, answer = disc_batch(3, 'triples of user, order, amount', meta,
  'opens_at', 'closes_at', 'max', 'per_user_count', 'per_user_amount', 'hold_ms', 'comp_cents',
  'close_reason', 'paused', 'blocked')
if stop then
  return stop
end
local shards = m[2] or '1'
local keys, users = {}, {}
for i = 1, n do
  local c = ARGV[3 * i + 1]
  if not string.match(c, '^[1-9]%d*$') or #c > 16 or tonumber(c) > 9007199254740991 then
    return redis.error_reply('HBARGS order amount ' .. c)
  end
  users[i] = ARGV[3 * i - 1]
  keys[i] = users[i] .. '/' .. ARGV[3 * i]
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- gate is the answer to a new reservation when the window is not open.
local gate = window(now, m[1], m[3], m[4], m[11], m[10], 'exhausted')

local recs = redis.call('HMGET', resv, unpack(keys))
-- Usage by user, in two tables: count and cents (no table per user).
local ucount, ucents = {}, {}
local have = redis.call('HMGET', usage, unpack(users))
for i = 1, n do
  local u = users[i]
  if have[i] and not ucount[u] then
    local c, a = string.match(have[i], '^(%d+):(%d+)$')
    if not c then
      return redis.error_reply('HBCORRUPT usage of ' .. u)
    end
    ucount[u], ucents[u] = tonumber(c), tonumber(a)
  end
end
local bl = false
if not gate and m[12] and m[12] ~= '0' then
  bl = redis.call('HMGET', blocked, unpack(users))
end
-- The head of the pool: at most one amount per request, parsed before any write.
local gseq, gcents, ngot = {}, {}, 0
if not gate then
  local got = redis.call('LRANGE', pool, 0, n - 1)
  ngot = #got
  for j = 1, ngot do
    local p = string.find(got[j], ':', 1, true)
    local cents = p and tonumber(string.sub(got[j], p + 1))
    if not cents or cents < 1 or not string.match(got[j], '^%d+:%d+$') then
      return redis.error_reply('HBCORRUPT pool entry ' .. got[j])
    end
    gseq[j], gcents[j] = string.sub(got[j], 1, p - 1), cents
  end
end

local mx, capn, capc = tonumber(m[5]), tonumber(m[6] or '0'), tonumber(m[7] or '0')
local comp = tonumber(m[9] or '0')
-- Every reservation of the batch ends its hold at the same moment.
local exp = now + tonumber(m[8])
local exps = string.format('%d', exp)
local empty = RAN_OUT
if shards ~= '1' then
  empty = DRY
end
local made, newrecs, holdsAdd, dirty = {}, {}, {}, {}
local taken, rcount, rcents, tcents = 0, 0, 0, 0
for i = 1, n do
  local key, user = keys[i], users[i]
  local rec = made[key] or recs[i]
  if rec then
    local st, seq, _, cents, rexp, oc = string.match(rec, RECORD)
    if not st then
      return redis.error_reply('HBCORRUPT record of ' .. key)
    end
    if (st == 'c' or (st == 'r' and now < tonumber(rexp))) and oc ~= ARGV[3 * i + 1] then
      answer(i, MISMATCH, 0, 0, 0)
    elseif st == 'c' then
      answer(i, CONFIRMED, tonumber(seq), tonumber(cents), tonumber(rexp))
    elseif st == 'r' and now < tonumber(rexp) then
      answer(i, ALREADY, tonumber(seq), tonumber(cents), tonumber(rexp))
    elseif st == 'x' then
      answer(i, CANCELLED, 0, 0, 0)
    else
      answer(i, EXPIRED, 0, 0, 0)
    end
  elseif gate then
    answer(i, gate, 0, 0, 0)
  elseif bl and bl[i] then
    answer(i, BLOCKED, 0, 0, 0)
  else
    local uc, ua = ucount[user] or 0, ucents[user] or 0
    if (capn > 0 and uc >= capn) or (capc > 0 and ua >= capc) then
      answer(i, LIMIT, 0, 0, 0)
    elseif taken == ngot then
      answer(i, empty, 0, 0, 0)
    else
      taken = taken + 1
      local a = gcents[taken]
      local allow = tonumber(ARGV[3 * i + 1])
      if capc > 0 and capc - ua < allow then
        allow = capc - ua
      end
      local top = mx - a
      if top > comp then
        top = comp
      elseif top < 0 then
        top = 0
      end
      local d = a + top
      if d > allow then
        d = allow
      end
      comp = comp - (d - a)
      rec = string.format(RECORD_FORMAT, 'r', gseq[taken], a, d, exps, ARGV[3 * i + 1])
      made[key] = rec
      newrecs[#newrecs + 1], newrecs[#newrecs + 2] = key, rec
      holdsAdd[#holdsAdd + 1] = exps .. '|' .. key
      ucount[user], ucents[user] = uc + 1, ua + d
      dirty[user] = true
      rcount, rcents, tcents = rcount + 1, rcents + d, tcents + a
      answer(i, OK, tonumber(gseq[taken]), d, exp)
    end
  end
end

if taken > 0 then
  local len = redis.call('LLEN', pool)
  if taken == len then
    redis.call('DEL', pool)
  else
    redis.call('LTRIM', pool, taken, -1)
  end
  redis.call('HSET', resv, unpack(newrecs))
  redis.call('RPUSH', holds, unpack(holdsAdd))
  local ups = {}
  for user in pairs(dirty) do
    ups[#ups + 1], ups[#ups + 2] = user, string.format('%d:%d', ucount[user], ucents[user])
  end
  redis.call('HSET', usage, unpack(ups))
  redis.call('HINCRBY', meta, 'reserved_count', rcount)
  redis.call('HINCRBY', meta, 'reserved_cents', string.format('%d', rcents))
  redis.call('HINCRBY', meta, 'taken_cents', string.format('%d', tcents))
  redis.call('HSET', meta, 'comp_cents', string.format('%d', comp))
end
return out
