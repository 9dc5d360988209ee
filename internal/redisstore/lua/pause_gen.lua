#!lua
-- pause_gen.lua: take the generation of a new pause or resume of a campaign (of a
-- discount campaign), which pause.lua then writes on every shard.
-- KEYS[1] the root's meta
-- ARGV[1] the newest generation the shards hold, read by the caller before (0 for
--         none): the new one is above it too
-- Reply   the new generation, a positive integer
-- Errors  HBNOCAMPAIGN no such campaign, or still loading; HBARGS ARGV[1] not a
--         non-negative integer
-- Writes  HINCRBY of pause_gen in meta (first HSET of it to ARGV[1] when below it).
-- Complexity O(1). Generations only grow: a call that took a later one started later,
-- and pause.lua lets no older call overwrite what it wrote. ARGV[1] lifts a counter
-- that fell behind the shards' (a root rebuilt without its meta), so a call's one
-- generation is above every write made before it started: a shard that refuses it
-- holds a later call's, which the caller leaves.
local meta = KEYS[1]
local above = ARGV[1]
--@include meta.lua
if not above or not (above == '0' or string.match(above, '^[1-9][0-9]*$')) or #above > 15 then
  return redis.error_reply('HBARGS pause generation ' .. tostring(above))
end
local m, err = live_meta(meta, 'campaign', 'pause_gen')
if not m then
  return err
end
if tonumber(m[2] or '0') < tonumber(above) then
  redis.call('HSET', meta, 'pause_gen', above)
end
return redis.call('HINCRBY', meta, 'pause_gen', 1)
