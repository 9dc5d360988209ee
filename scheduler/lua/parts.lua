#!lua
-- parts.lua: announce a settle process of a deployment (of one part or several), and list the
-- live ones.
-- KEYS[1] members hash: member -> "<parts> <expiry, ms of the Redis clock> <held, comma-separated>"
-- KEYS[2] mark of the deployment's single lease (what a process of one part holds)
-- ARGV[1] the caller's member id; empty to check only
-- ARGV[2] the caller's number of parts (decimal digits)
-- ARGV[3] how long the announcement lives, in ms (>= 1)
-- ARGV[4] the parts the caller holds or is taking, comma-separated (may be empty)
-- Reply   flat list member, held of every live member (the caller last when it announced)
-- Errors  HBPARTS a live member counts another number of parts (that number follows), or,
--         to a caller of several parts, a process of one part that does not announce itself
--         (an older build) holds the single lease; HBARGS malformed arguments. Both raised
--         before any write.
-- Writes  when announcing: HDEL of announcements past their expiry, HSET of the caller's,
--         PEXPIRE of the hash unless it lives longer already (it outlives its longest
--         announcement by nothing).
-- Complexity O(members).
local members, single = KEYS[1], KEYS[2]
local me, parts, ttl, held = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not string.match(parts, '^[1-9]%d*$') or not ttl or ttl < 1 or ttl % 1 ~= 0 then
  return redis.error_reply('HBARGS parts and ttl must be positive integers')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if me ~= '' and parts ~= '1' and redis.call('EXISTS', single) == 1 then
  return redis.error_reply('HBPARTS 1: a process of one part holds the single lease')
end
local all = redis.call('HGETALL', members)
local out, stale = {}, {}
for i = 1, #all, 2 do
  local m, v = all[i], all[i + 1]
  local p, exp, h = string.match(v, '^(%d+) (%d+) ?(.*)$')
  if not p or tonumber(exp) <= now then
    stale[#stale + 1] = m
  elseif m ~= me then
    if p ~= parts then
      return redis.error_reply('HBPARTS ' .. p .. ': a live settle process counts ' .. p .. ' parts')
    end
    out[#out + 1] = m
    out[#out + 1] = h
  end
end
if me == '' then
  return out
end
if #stale > 0 then
  redis.call('HDEL', members, unpack(stale))
end
redis.call('HSET', members, me, parts .. ' ' .. (now + ttl) .. ' ' .. held)
if redis.call('PTTL', members) < ttl then
  redis.call('PEXPIRE', members, ttl)
end
out[#out + 1] = me
out[#out + 1] = held
return out
