#!lua
-- update.lua: store each record only when its version is newer than the stored one,
-- and keep optional summary counts in step with the records.
-- KEYS[1..n]      record hashes, one per update, in update order
-- KEYS[n+1..n+m]  summary hashes the updates count into (m may be 0)
-- ARGV[1]         n, the number of updates (1..1000)
-- ARGV[2..]       n groups, one per update, each: version (decimal digits, below 2^53),
--                 summary index (0 none, else 1..m), counted field ('' when none),
--                 f (0..1000), then f field/value pairs
-- Reply   a flat array of 2n integers, two per update in order: applied (1 stored,
--         0 stale: the stored version is equal or newer, ties are stale), then the
--         version stored once this update has run.
-- Errors  HBVERSION a version, given or stored, that is not an integer in [0, 2^53);
--         HBARGS malformed arguments. Both are raised before any write.
-- Writes  per applied update: one HSET of the version field _v and the given fields
--         (fields not given keep their values); when it counts into a summary and the
--         counted field changes, HINCRBY -1 on the old value (HDEL at zero), +1 on the new.
-- Complexity O(total fields). An update of a key repeated in one batch sees the
--         write of the earlier one.
-- Versions are compared as Lua numbers (doubles): exact below 2^53, hence the bound.
local n = tonumber(ARGV[1])
local VERSION = '_v'
local LIMIT = 9007199254740992 -- 2^53

local function parse_version(s)
  if type(s) ~= 'string' or #s == 0 or #s > 16 or not string.match(s, '^%d+$') then
    return nil
  end
  local v = tonumber(s)
  if v >= LIMIT then
    return nil
  end
  return v
end

local function count(x, lo, hi)
  return x and x % 1 == 0 and x >= lo and x <= hi
end

if not count(n, 1, 1000) or #KEYS < n then
  return redis.error_reply('HBARGS want 1..1000 updates and a key for each')
end
local m = #KEYS - n

-- Pass 1: check every argument and every stored version before the first write.
local ups = {}
local i = 2
for u = 1, n do
  local vs, si, cf, f = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], tonumber(ARGV[i + 3])
  local v = parse_version(vs)
  if not v then
    return redis.error_reply('HBVERSION update ' .. u .. ': version ' .. tostring(vs) ..
      ' is not an integer in [0, 2^53)')
  end
  if not count(si, 0, m) or not count(f, 0, 1000) or i + 3 + 2 * f > #ARGV
      or (si > 0 and (cf == '' or cf == VERSION)) then
    return redis.error_reply('HBARGS update ' .. u .. ': malformed arguments')
  end
  for j = i + 4, i + 3 + 2 * f, 2 do
    if ARGV[j] == VERSION then
      return redis.error_reply('HBARGS update ' .. u .. ': field ' .. VERSION .. ' is reserved')
    end
  end
  ups[u] = { v = v, vs = vs, si = si, cf = cf, first = i + 4, f = f }
  i = i + 4 + 2 * f
end
if i ~= #ARGV + 1 then
  return redis.error_reply('HBARGS ' .. (#ARGV + 1 - i) .. ' arguments left over')
end
local function bad_stored(key, s)
  return redis.error_reply('HBVERSION stored version ' .. s .. ' of ' .. key ..
    ' is not an integer in [0, 2^53)')
end
-- A single update needs no separate pass: its own check in pass 2 comes
-- before its write.
if n > 1 then
  for u = 1, n do
    local s = redis.call('HGET', KEYS[u], VERSION)
    if s and not parse_version(s) then
      return bad_stored(KEYS[u], s)
    end
  end
end

-- Pass 2: apply.
local out = {}
for u = 1, n do
  local up, key = ups[u], KEYS[u]
  local cur, old
  if up.si > 0 then
    local r = redis.call('HMGET', key, VERSION, up.cf)
    cur, old = r[1], r[2]
  else
    cur = redis.call('HGET', key, VERSION)
  end
  local stored = cur and parse_version(cur)
  if cur and not stored then
    return bad_stored(key, cur)
  end
  if stored and up.v <= stored then
    out[#out + 1] = 0
    out[#out + 1] = stored
  else
    -- The version is stored as the given digits: tostring of a large Lua
    -- number would print it in exponent form.
    local args = { VERSION, up.vs }
    local new
    for j = up.first, up.first + 2 * up.f - 1, 2 do
      args[#args + 1] = ARGV[j]
      args[#args + 1] = ARGV[j + 1]
      if up.si > 0 and ARGV[j] == up.cf then
        new = ARGV[j + 1]
      end
    end
    redis.call('HSET', key, unpack(args))
    if new and new ~= old then
      local summary = KEYS[n + up.si]
      if old and redis.call('HINCRBY', summary, old, -1) == 0 then
        redis.call('HDEL', summary, old)
      end
      redis.call('HINCRBY', summary, new, 1)
    end
    out[#out + 1] = 1
    out[#out + 1] = up.v
  end
end
return out
