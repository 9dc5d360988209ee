#!lua
-- claim.lua: take the delivery lease of one message, with a fencing token.
-- KEYS[1] mark: "c:<token>" while claimed (expires with the lease),
--               "d:<token>" once delivered (expires after the keep time)
-- KEYS[2] fence: the message's token counter
-- ARGV[1] lease in ms (>= 1)
-- ARGV[2] how long the counter outlives the lease, in ms (>= 1)
-- Reply   {status, token, ttl}: 1 CLAIMED, token the new fencing token, ttl the lease;
--         2 BUSY, another worker's lease, ttl the ms it has left; 3 DELIVERED, ttl
--         the ms the mark is kept (-1: for ever). token is 0 unless CLAIMED.
-- Errors  HBARGS malformed arguments; HBCORRUPT a mark the package never writes.
--         Both are raised before any write.
-- Writes  when CLAIMED: INCR of the counter, SET of the mark with PX, and PEXPIRE of
--         the counter when its time to live is shorter than lease + ARGV[2].
-- Complexity O(1).
-- The counter only grows while it lives, so a later claim always has a larger token
-- than an earlier one; drawing the token and taking the mark in one script keeps it so.
local mark, fence = KEYS[1], KEYS[2]
local lease, fence_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
--@include fence.lua

if not ms(lease) or not ms(fence_ms) then
  return redis.error_reply('HBARGS lease and counter time must be whole ms >= 1')
end

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

local token = redis.call('INCR', fence)
-- %.0f prints every integer below 2^53 exactly; tostring would use exponents.
redis.call('SET', mark, 'c:' .. string.format('%.0f', token), 'PX', lease)
outlive(fence, lease + fence_ms)
return { 1, token, lease }
