#!lua
-- claim.lua: take the delivery lease of one message, with a fencing token.
-- KEYS[1] mark: "c:<token>" while claimed (expires with the lease),
--               "d:<token>" once delivered (expires after the keep time)
-- KEYS[2] fence: the message's token counter, the last token drawn
-- ARGV[1] lease in ms (>= 1)
-- ARGV[2] how long the counter outlives the lease, in ms (>= 1)
-- ARGV[3] floor: the token must be above it (decimal digits below 2^53 - 1; 0 for none)
-- Reply   {status, token, ttl}: 1 CLAIMED, token the new fencing token, ttl the lease;
--         2 BUSY, another worker's lease, ttl the ms it has left; 3 DELIVERED, ttl
--         the ms the mark is kept (-1: for ever). token is 0 unless CLAIMED.
-- Errors  HBARGS malformed arguments; HBCORRUPT a mark the package never writes, or a
--         counter that holds no token below 2^53 - 1. Both are raised before any write.
-- Writes  when CLAIMED: INCRBY of the counter up to the token, SET of the mark with PX,
--         and PEXPIRE of the counter when its time to live is shorter than lease + ARGV[2].
-- Complexity O(1).
-- The token is the largest of the counter + 1, the Redis clock in microseconds since
-- the epoch (TIME) and the floor + 1, and the counter is raised to it (INCRBY, so an
-- older build's INCR goes on from there). While the counter lives, each claim's token
-- is above the one before; a counter lost (a failover to a replica that missed the
-- last claims, a restart without persistence, FLUSHALL, its expiry) starts again from
-- the clock, above every token drawn before as long as the clock has moved on by more
-- than the claims that outran it (the package doc states the bound). Drawing the token
-- and taking the mark in one script keeps a stalled worker from installing an older
-- token after a newer claim came and went.
local mark, fence = KEYS[1], KEYS[2]
local lease, fence_ms, floor = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local LIMIT = 9007199254740991 -- 2^53 - 1: the largest token; doubles are exact below
--@include fence.lua

if not ms(lease) or not ms(fence_ms) or not (floor == '0' or is_token(floor)) or #floor > 16
    or tonumber(floor) >= LIMIT then
  return redis.error_reply('HBARGS lease and counter time must be whole ms >= 1, floor a token')
end
floor = tonumber(floor)

local cur = redis.call('GET', mark)
if cur then
  local state = string.sub(cur, 1, 2)
  if state == 'd:' then
    return { 3, 0, redis.call('PTTL', mark) }
  elseif state == 'c:' then
    return { 2, 0, redis.call('PTTL', mark) }
  end
  return redis.error_reply('HBCORRUPT mark ' .. mark .. ' holds ' .. cur)
end

local last = redis.call('GET', fence) or '0'
if not (last == '0' or is_token(last)) or #last > 16 or tonumber(last) >= LIMIT then
  return redis.error_reply('HBCORRUPT counter ' .. fence .. ' holds ' .. last)
end
last = tonumber(last)
local t = redis.call('TIME')
local token = math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]), floor + 1)
-- %.0f prints every integer below 2^53 exactly; tostring would use exponents.
redis.call('INCRBY', fence, string.format('%.0f', token - last))
redis.call('SET', mark, 'c:' .. string.format('%.0f', token), 'PX', lease)
outlive(fence, lease + fence_ms)
return { 1, token, lease }
