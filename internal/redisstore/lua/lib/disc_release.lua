-- disc_release.lua: release reservations of a discount campaign's shard, as a cancel
-- (disc_cancel.lua) and an expiry (disc_reap.lua) do: each amount goes back to the head
-- of the pool as one unit of quota, and the user's usage goes down by it.
-- Defines  usage_of(usage, users), releaser(meta, pool, usage, resv, used)
-- Errors   HBCORRUPT a usage that cannot be read
-- Writes   (releaser's functions) per reservation released: LPUSH of "<seq>:<r>" to the
--          pool, with r = min(cents, the amount first taken from the pool), and HSET of
--          its record; then HSET of the users' usage (HDEL at zero) and HINCRBY of
--          reserved_count, reserved_cents, returned_cents (what went back to the pool)
--          and comp_cents (the rest) in meta.
-- The amount returns to the pool, not to compensation: it holds a unit of quota, and
-- only the pool holds units, so confirmed + reserved + remaining stays equal to the
-- quota as well as to the budget. At the head it is served next.
--@include disc_record.lua

-- usage_of reads the usage "<count>:<cents>" of users (a list, which may repeat a
-- user) before any write: user -> {count, cents}, 0:0 for a user without usage; or
-- nil and an HBCORRUPT error.
local function usage_of(usage, users)
  local used = {}
  if #users > 0 then
    local have = redis.call('HMGET', usage, unpack(users))
    for j = 1, #users do
      local c, a = string.match(have[j] or '0:0', '^(%d+):(%d+)$')
      if not c then
        return nil, redis.error_reply('HBCORRUPT usage of ' .. users[j])
      end
      used[users[j]] = {tonumber(c), tonumber(a)}
    end
  end
  return used
end

-- releaser returns release(key, user, p, st), which releases the reservation p (a
-- record's parts: p[2] seq, p[3] amount, p[4] cents, p[5] expiry, p[6] order cents,
-- numbers for p[3] and p[4]) of the order key of user, whose usage is in used
-- (usage_of), as state st; and finish(), which writes the usage and the counters of
-- all those released, and returns how many there were.
local function releaser(meta, pool, usage, resv, used)
  local count, cents_sum, comp_add, back, dirty = 0, 0, 0, 0, {}
  local function release(key, user, p, st)
    local r = math.min(p[3], p[4])
    redis.call('LPUSH', pool, p[2] .. ':' .. string.format('%d', r))
    comp_add, back = comp_add + p[4] - r, back + r
    local u = used[user]
    u[1], u[2] = math.max(u[1] - 1, 0), math.max(u[2] - p[4], 0)
    dirty[user] = true
    redis.call('HSET', resv, key, string.format(RECORD_FORMAT, st, p[2], p[3], p[4], p[5], p[6]))
    count, cents_sum = count + 1, cents_sum + p[4]
  end
  local function finish()
    if count == 0 then
      return 0
    end
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
    return count
  end
  return release, finish
end
