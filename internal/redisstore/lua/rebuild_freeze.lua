#!lua
-- rebuild_freeze.lua: stop every use of a campaign's shard before a rebuild reads and
-- rewrites it, and remember the state it had.
-- KEYS[1] meta
-- ARGV[1] rebuild token (random, names this rebuild)
-- Reply   {found, state}: found is 1 when the shard's meta existed before this call,
--         state the state it had before any rebuild ('' when it did not exist)
-- Errors  HBSTATE the shard is loading for a create, or is settled
-- Writes  HSET of meta: state loading, rebuild_token, and rebuild_from (the state before
--         the first rebuild that froze it); a meta that did not exist is created with
--         those fields alone.
-- Complexity O(1). While loading, every script that grants, lends, receives, closes or
-- settles answers NO_CAMPAIGN or refuses, and the settlement worker skips the campaign:
-- nothing moves under the rebuild. A rebuild interrupted and run again takes over
-- (the newest token wins) and keeps the state from before the first.
local meta = KEYS[1]
local token = ARGV[1]
local m = redis.call('HMGET', meta, 'state', 'load_token', 'rebuild_token', 'rebuild_from')
local state = m[1]
if state == 'settled' then
  return redis.error_reply('HBSTATE the shard is settled')
end
if state == 'loading' and not m[3] then
  return redis.error_reply('HBSTATE the campaign is loading for a create')
end
if state == 'loading' then
  redis.call('HSET', meta, 'rebuild_token', token)
  return {1, m[4] or ''}
end
redis.call('HSET', meta, 'state', 'loading', 'rebuild_token', token, 'rebuild_from', state or '')
if not state then
  return {0, ''}
end
return {1, state}
