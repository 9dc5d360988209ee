#!lua
-- disc_reap.lua: expire the reservations of one shard of a discount campaign whose
-- hold has passed by the Redis clock: each amount goes back to the head of the pool
-- and the user's usage goes down by it, as a cancel does.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] usage  KEYS[4] reservations  KEYS[5] holds
-- ARGV[1] the most holds to take off the list in this call (1..1000)
-- Reply   {expired, more}: how many reservations this call expired, and 1 when more
--         holds may be due (call again), else 0. {0, 0} for a shard that does not
--         exist.
-- Errors  HBARGS bad count; HBCORRUPT a hold, record or usage that cannot be read.
--         All raised before any write.
-- Writes  LTRIM of the due holds off the head of the holds list; for each that is
--         still reserved with that expiry: LPUSH of "<seq>:<r>" to the pool (r as in
--         disc_cancel.lua, the rest to comp_cents), the user's usage down (HDEL at
--         zero), the record's state e; HINCRBY of reserved_count, reserved_cents and
--         returned_cents in meta.
-- Complexity O(holds taken off). The holds list is in expiry order (every hold of a
-- campaign is as long; a reservation appends its hold), so the due ones are at its
-- head; holds of reservations confirmed or cancelled meanwhile are dropped here.
-- Running it twice changes nothing the second time: a due hold leaves the list in
-- the step that releases its reservation, and only a reservation still held is.
local meta, pool, usage, resv, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
--@include disc_record.lua
--@include disc_release.lua
local most = tonumber(ARGV[1])
if not most or most < 1 or most > 1000 or most ~= math.floor(most) then
  return redis.error_reply('HBARGS want a count in 1..1000')
end
if redis.call('EXISTS', meta) == 0 then
  return {0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('LRANGE', holds, 0, most - 1)
local due, keys = 0, {}
for i = 1, #head do
  local exp, key = string.match(head[i], '^(%d+)|(.+)$')
  if not exp then
    return redis.error_reply('HBCORRUPT hold ' .. head[i])
  end
  if tonumber(exp) > now then
    break
  end
  due = due + 1
  keys[due] = key
  head[i] = exp
end
if due == 0 then
  return {0, 0}
end

local recs = redis.call('HMGET', resv, unpack(keys))
local parsed, users = {}, {}
for i = 1, due do
  if recs[i] then
    local st, seq, a, d, exp, oc = string.match(recs[i], RECORD)
    local user = string.match(keys[i], '^(.*)/[^/]*$')
    if not st or not user then
      return redis.error_reply('HBCORRUPT record of ' .. keys[i])
    end
    if st == 'r' and exp == head[i] then
      parsed[i] = {user, seq, tonumber(a), tonumber(d), exp, oc}
      users[#users + 1] = user
    end
  end
end
local used, err = usage_of(usage, users)
if not used then
  return err
end

redis.call('LTRIM', holds, due, -1)
local release, finish = releaser(meta, pool, usage, resv, used)
for i = 1, due do
  local p = parsed[i]
  if p then
    release(keys[i], p[1], p, 'e')
  end
end
local count = finish()
local more = 0
if due == most then
  more = 1
end
return {count, more}
