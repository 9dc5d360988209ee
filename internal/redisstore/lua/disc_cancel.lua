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
-- The amount returns to the pool, not to compensation: it holds a unit of quota,
-- and only the pool holds units, so confirmed + reserved + remaining stays equal to
-- the quota as well as to the budget. At the head it is served next.
local meta, pool, usage, resv = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local n = (#ARGV - 1) / 2

if n < 1 or n > 1000 or n ~= math.floor(n) then
  return redis.error_reply('HBBATCH want 1..1000 pairs of user, order')
end
local out = {}
local function answer(i, code, seq, cents)
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = code, seq, cents, 0
end
local m = redis.call('HMGET', meta, 'state', 'shards')
if not m[1] or m[1] == 'loading' then
  for i = 1, n do
    answer(i, 6, 0, 0)
  end
  return out
end
if (m[2] or '1') ~= ARGV[1] then
  return redis.error_reply('HBSHARDS ' .. (m[2] or '1'))
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
    local st, seq, a, d, exp, oc = string.match(recs[i], '^(%a)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
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
local used = {}
if #users > 0 then
  local have = redis.call('HMGET', usage, unpack(users))
  for j = 1, #users do
    local c, a = string.match(have[j] or '0:0', '^(%d+):(%d+)$')
    if not c then
      return redis.error_reply('HBCORRUPT usage of ' .. users[j])
    end
    used[users[j]] = {tonumber(c), tonumber(a)}
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- release returns reservation p of user to the pool and the usage, as state st.
local count, cents_sum, comp_add, back, dirty = 0, 0, 0, 0, {}
local function release(key, user, p, st)
  local r = math.min(p[3], p[4])
  redis.call('LPUSH', pool, p[2] .. ':' .. string.format('%d', r))
  comp_add, back = comp_add + p[4] - r, back + r
  local u = used[user]
  u[1], u[2] = math.max(u[1] - 1, 0), math.max(u[2] - p[4], 0)
  dirty[user] = true
  redis.call('HSET', resv, key, st .. '|' .. p[2] .. string.format('|%d|%d|', p[3], p[4]) .. p[5] .. '|' .. p[6])
  count, cents_sum = count + 1, cents_sum + p[4]
end

for i = 1, n do
  local p = parsed[i]
  if not p then
    answer(i, 11, 0, 0)
  elseif p[1] == 'r' then
    local st, code = 'x', 1
    if now >= tonumber(p[5]) then
      st, code = 'e', 10
    end
    release(keys[i], ARGV[2 * i], p, st)
    p[1] = st
    answer(i, code, tonumber(p[2]), p[4])
  elseif p[1] == 'c' then
    answer(i, 12, tonumber(p[2]), p[4])
  elseif p[1] == 'x' then
    answer(i, 2, tonumber(p[2]), p[4])
  else
    answer(i, 10, tonumber(p[2]), p[4])
  end
end
if count > 0 then
  for user in pairs(dirty) do
    local u = used[user]
    if u[1] == 0 and u[2] == 0 then
      redis.call('HDEL', usage, user)
    else
      redis.call('HSET', usage, user, string.format('%d:%d', u[1], u[2]))
    end
  end
  redis.call('HINCRBY', meta, 'reserved_count', -count)
  redis.call('HINCRBY', meta, 'reserved_cents', string.format('%d', -cents_sum))
  redis.call('HINCRBY', meta, 'returned_cents', string.format('%d', back))
  if comp_add > 0 then
    redis.call('HINCRBY', meta, 'comp_cents', string.format('%d', comp_add))
  end
end
return out
