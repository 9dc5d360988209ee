#!lua
-- grab.lua: grant packets to a batch of users, at most one per user.
-- KEYS[1] meta  KEYS[2] pool  KEYS[3] claims  KEYS[4] grants stream  KEYS[5] blocked
--         users (of one shard)
-- ARGV[1] the campaign's shard count as the caller knows it
-- ARGV[2..n+1] user ids (1 <= n <= 3000); a user may appear more than once
-- Reply   n elements, one per user in ARGV order:
--           "<seq>:<cents>"    a bulk string: GRANTED, this packet, now
--           {"<seq>:<cents>"}  a one-element array: ALREADY, the packet the user holds
--           an integer code of lib/outcomes.lua: RAN_OUT (3, SOLD_OUT), NOT_OPEN (4),
--                              CLOSED (5), NO_CAMPAIGN (6), DRY (7: a shard of a
--                              sharded campaign is empty while open: the caller
--                              refills it from another shard and asks again), SEALED
--                              (16: the opened part of the pool is empty and a sealed
--                              part remains: the caller opens the next block,
--                              block_peek.lua, then block_open.lua, and asks again),
--                              PAUSED (14: meta's paused is 1 while the window is
--                              open), BLOCKED (15: the user is in the blocked hash;
--                              meta's blocked counts its users, and 0 or absent spares
--                              the read); PAUSED and BLOCKED only to users who hold
--                              no packet
--         then, only when the batch granted a packet, the id of its grants stream entry
--         (a bulk string "<ms>-<n>": Redis' clock at the grant, the grant time the
--         ledger records from the same id; XADD answers it, so it costs no command)
--         then, only when a sealed part remains and the batch leaves fewer than a quarter
--         of meta's block in the opened part, one more element, the integer LOW (0), a
--         hint to open the next block ahead of need, off the grab's path
-- Errors  HBBATCH batch size out of range; HBSHARDS <count> the campaign has another
--         shard count than ARGV[1] (the caller routed the users with a stale layout);
--         HBCORRUPT a pool entry that is not "<seq>:<cents>". All raised before any write.
-- Writes  when some users are new and the opened part is not empty: the granted packets
--         leave the tail of the pool (LTRIM, or DEL when it runs dry), one HSET of
--         all new claims, one XADD of the whole batch to the grants stream (field
--         user, value "<seq>:<cents>" per grant), one HINCRBY per counter; when the
--         pool of a one-shard campaign runs dry the campaign closes with close_reason
--         sold_out (a sharded campaign is closed by the caller, once every shard is dry).
-- Complexity O(n), with a constant number of Redis commands per batch: the
--         per-call cost of Redis is paid once for n users.
-- A packet is one preformatted string that flows unchanged from the pool to the
-- claim, the stream and the reply: formatting numbers in Lua is what a grab
-- would otherwise spend most of its time on.
-- The pool's head holds meta's sealed packets (0 when absent): the pop frontier. Only
-- the packets after them, the opened part, are handed out, so a packet is popped only
-- from a block the engine recorded in the ledger first (docs/durability.md, rebuild).
-- A pause or a block is decided here, from meta read in this call: no grab that
-- runs after the write of paused or of the blocked hash is granted.
local meta, pool, claims, grants, blocked = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
--@include outcomes.lua
--@include window.lua
local n = #ARGV - 1

if n < 1 or n > 3000 then
  return redis.error_reply('HBBATCH batch of ' .. n .. ' users, want 1..3000')
end

local out = {}
local function answer_all(code)
  for i = 1, n do
    out[i] = code
  end
  return out
end

local m = redis.call('HMGET', meta, 'state', 'opens_at', 'closes_at', 'close_reason', 'shards', 'sealed', 'block',
  'paused', 'blocked')
local state = m[1]
if not state or state == 'loading' then
  return answer_all(NO_CAMPAIGN)
end
local shards = m[5] or '1'
if shards ~= ARGV[1] then
  return redis.error_reply('HBSHARDS ' .. shards)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- closed_code is the answer for users without a packet once grabbing has ended,
-- or while an operator paused it (pause.lua); before the window every user is
-- answered NOT_OPEN.
local closed_code = window(now, state, m[2], m[3], m[8], m[4], 'sold_out')
if closed_code == NOT_OPEN then
  return answer_all(NOT_OPEN)
end

local held = redis.call('HMGET', claims, unpack(ARGV, 2))

if closed_code then
  for i = 1, n do
    if held[i] then
      out[i] = {held[i]}
    else
      out[i] = closed_code
    end
  end
  return out
end

-- Open. A blocked user who holds nothing is answered BLOCKED.
local bl = false
if m[9] and m[9] ~= '0' then
  bl = redis.call('HMGET', blocked, unpack(ARGV, 2))
end

-- Count the distinct users who hold nothing yet and are not blocked.
local first = {}
local need = 0
for i = 1, n do
  local u = ARGV[i + 1]
  if not held[i] and not first[u] and not (bl and bl[i]) then
    first[u] = i
    need = need + 1
  end
end

local len, k, got = 0, 0, nil
local sealed = tonumber(m[6] or '0')
if need > 0 then
  len = redis.call('LLEN', pool)
  k = math.min(need, len - math.min(sealed, len))
  if k > 0 then
    got = redis.call('LRANGE', pool, len - k, len - 1)
  end
end

-- The answer of a user left without a packet: a one-shard campaign is sold out;
-- a shard of a sharded one is only dry.
-- Either waits for the next block while a sealed part remains.
local empty = RAN_OUT
if sealed > 0 then
  empty = SEALED
elseif shards ~= '1' then
  empty = DRY
end

-- Hand out packets from the tail; sum their cents on the way. Nothing has
-- been written yet, so a corrupt entry stops the script cleanly.
local pairs_ = {}
local given = {}
local granted, cents_sum = 0, 0
for i = 1, n do
  local u = ARGV[i + 1]
  if held[i] then
    out[i] = {held[i]}
  elseif bl and bl[i] then
    out[i] = BLOCKED
  elseif first[u] == i then
    if granted < k then
      granted = granted + 1
      local claim = got[k - granted + 1]
      local p = string.find(claim, ':', 1, true)
      local cents = p and tonumber(string.sub(claim, p + 1))
      if not cents then
        return redis.error_reply('HBCORRUPT pool entry ' .. claim)
      end
      cents_sum = cents_sum + cents
      given[u] = claim
      pairs_[2 * granted - 1], pairs_[2 * granted] = u, claim
      out[i] = claim
    else
      out[i] = empty
    end
  elseif given[u] then
    out[i] = {given[u]}
  else
    out[i] = empty
  end
end

if granted > 0 then
  if granted == len then
    redis.call('DEL', pool)
  else
    redis.call('LTRIM', pool, 0, len - granted - 1)
  end
  redis.call('HSET', claims, unpack(pairs_))
  out[n + 1] = redis.call('XADD', grants, '*', unpack(pairs_))
  redis.call('HINCRBY', meta, 'granted_count', granted)
  redis.call('HINCRBY', meta, 'granted_cents', string.format('%d', cents_sum))
  if granted == len and shards == '1' then
    redis.call('HSET', meta, 'state', 'closed', 'close_reason', 'sold_out',
      'closed_at', string.format('%d', now))
  end
end
if sealed > 0 and need > 0 and len - sealed - granted < math.max(math.floor(tonumber(m[7] or '0') / 4), 1) then
  out[#out + 1] = LOW
end
return out
