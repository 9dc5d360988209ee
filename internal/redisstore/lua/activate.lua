#!lua
-- activate.lua: make a fully loaded campaign live, in one step.
-- KEYS[1] meta  KEYS[2] staging  KEYS[3] pool  KEYS[4] grants  KEYS[5] blocked users
-- ARGV[1] load token
-- ARGV[2] opens_at, ms since the epoch; 0 means now (by the Redis clock)
-- ARGV[3] closes_at, ms; 0 means opens_at + ARGV[4]
-- ARGV[4] default open window, ms
-- Reply   {state, opens_at, closes_at}; state is 'scheduled' or 'open'
-- Errors  HBSTALE not loading or another loader; HBCOUNT / HBSUM staged contents differ
--         from the spec (a shard's share, base_count and base_cents, when meta has
--         them; else count and total); HBWINDOW closes_at not after opens_at or
--         already past
-- Writes  RENAME of staging to pool, XGROUP CREATE of the settle group at 0 (MKSTREAM),
--         HDEL of the load fields (load_token, load_lease, load_until, the staged
--         counters; load_epoch stays, the fence of a later begin of the shard) and
--         HSET of state, opens_at, closes_at, created_at and the zeroed counters in
--         meta, HSET of the blocked hash's placeholder field
--         '' (no user id is empty), so that the key grab.lua takes always exists.
-- Complexity O(1). Every check runs before the first write; RENAME makes the pool
-- appear whole, so no grab ever sees a half-loaded pool. On a slot being migrated
-- between cluster nodes Redis refuses (TRYAGAIN) a script some of whose keys are
-- missing: a blocked hash that existed only once someone is blocked would stop
-- every grab there until the migration ended.
local meta, staging, pool, grants, blocked = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token = ARGV[1]

local m = redis.call('HMGET', meta, 'state', 'load_token', 'staged_count', 'staged_cents', 'count', 'total',
  'base_count', 'base_cents')
if m[1] ~= 'loading' or m[2] ~= token then
  return redis.error_reply('HBSTALE the load was superseded or the campaign is not loading')
end
m[5], m[6] = m[7] or m[5], m[8] or m[6]
local len = redis.call('LLEN', staging)
if tonumber(m[3]) ~= tonumber(m[5]) or len ~= tonumber(m[5]) then
  return redis.error_reply('HBCOUNT staged ' .. len .. ' packets (counted ' .. m[3] .. '), spec says ' .. m[5])
end
if m[4] ~= m[6] then
  return redis.error_reply('HBSUM staged ' .. m[4] .. ' cents, spec says ' .. m[6])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local opens = tonumber(ARGV[2])
if opens == 0 then
  opens = now
end
local closes = tonumber(ARGV[3])
if closes == 0 then
  closes = opens + tonumber(ARGV[4])
end
if closes <= opens then
  return redis.error_reply('HBWINDOW closes_at must be after opens_at')
end
if closes <= now then
  return redis.error_reply('HBWINDOW closes_at is already past')
end
local state = 'scheduled'
if now >= opens then
  state = 'open'
end

redis.call('RENAME', staging, pool)
redis.call('XGROUP', 'CREATE', grants, 'settle', '0', 'MKSTREAM')
redis.call('HDEL', meta, 'load_token', 'load_lease', 'load_until', 'staged_count', 'staged_cents')
redis.call('HSET', meta, 'state', state, 'opens_at', string.format('%d', opens),
  'closes_at', string.format('%d', closes), 'created_at', string.format('%d', now),
  'granted_count', 0, 'granted_cents', 0, 'refunded_cents', 0)
redis.call('HSET', blocked, '', '0')
return {state, opens, closes}
