-- loader.lua: who may begin loading a campaign, or one shard of it, and the hold a
-- create keeps on the campaign it loads.
-- Defines  clock_ms(), begin_gate(meta, token, epoch, now, idle), start_load(meta, token,
--          epoch, begun, lease, now, spec), renew_hold(meta, lease)
-- Errors   none
-- Writes   start_load: HSET of meta; renew_hold: HSET of load_until in meta
-- Two creates of one campaign must not both load it. The root's meta records the
-- load that holds the campaign (load_token) and until when (load_until, Redis clock):
-- the loader renews the hold while it works (every chunk it loads, and renew.lua
-- between its other steps); another create's begin while the hold runs is told to
-- wait, and once it lapsed (its loader died or stalled) takes the load over. Each
-- begin of a root draws an epoch (load_epoch) above every one drawn before it; the
-- other shards of the campaign are begun with the root's epoch and refuse a lower
-- one, so a loader that lost the root can no longer write any shard of the newer
-- load: a live campaign's shards are all of the load that activated its root.

-- clock_ms is the Redis clock in ms.
local function clock_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- begin_gate decides whether the load named token, of epoch epoch (0 at a campaign's
-- root), may begin on meta at time now: it returns the epoch to begin with, or nil
-- and the reply to give instead: {1, state} past loading (a shard other than the root
-- that idle() says never served is begun again), or frozen by a rebuild ('loading');
-- {2, ms} another load holds the root for ms more, or a newer load began this shard
-- ({2, 0}).
local function begin_gate(meta, token, epoch, now, idle)
  local m = redis.call('HMGET', meta, 'state', 'rebuild_token', 'load_token', 'load_until', 'load_epoch')
  local state, last = m[1], tonumber(m[5] or '0')
  if state == 'loading' and m[2] then
    -- A rebuild froze it: what it holds is evidence, not a load to throw away.
    return nil, {1, state}
  end
  if epoch > 0 then
    if last > epoch then
      return nil, {2, 0}
    end
    if state and state ~= 'loading' and not idle() then
      return nil, {1, state}
    end
    return epoch
  end
  if state and state ~= 'loading' then
    return nil, {1, state}
  end
  if state == 'loading' and m[3] ~= token then
    local left = tonumber(m[4] or '0') - now
    if left > 0 then
      return nil, {2, left}
    end
  end
  -- Above every epoch drawn before, even when the root's meta was lost since.
  return math.max(last + 1, now)
end

-- start_load writes the meta of a load begun under epoch begun (begin_gate's) by the
-- load named token, asked with epoch (0 at the root, which gets a hold of lease ms from
-- now), and the spec fields in spec (field, value, ...): state loading, the load's
-- fields and zero staged counters.
local function start_load(meta, token, epoch, begun, lease, now, spec)
  local fields = {'state', 'loading', 'load_token', token, 'load_epoch', string.format('%d', begun),
    'staged_count', '0', 'staged_cents', '0'}
  if epoch == 0 then
    fields[#fields + 1], fields[#fields + 2] = 'load_lease', string.format('%d', lease)
    fields[#fields + 1], fields[#fields + 2] = 'load_until', string.format('%d', now + lease)
  end
  for _, v in ipairs(spec) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', meta, unpack(fields))
end

-- renew_hold sets the hold of the load on meta to last lease ms from now, when the load
-- has one (lease nil: a shard other than the root, whose load_lease is absent).
local function renew_hold(meta, lease)
  if lease then
    redis.call('HSET', meta, 'load_until', string.format('%d', clock_ms() + tonumber(lease)))
  end
end
