#!lua
-- release.lua: hand a claimed message back, so that another worker delivers it.
-- KEYS[1] mark (see claim.lua)  KEYS[2] fence: the message's token counter
-- ARGV[1] the caller's token (decimal digits)
-- Reply   {ok, now}: ok 1 when the message is free now (this call deleted the
--         claim, or the lease had run out and nobody claimed since); ok 0 when the
--         token does not hold the message, and now says what does: 0 nothing (a
--         later token came and went), 2 a claim under another token, 3 delivered
--         (under any token: a delivered message cannot be handed back).
-- Errors  HBARGS malformed arguments, raised before any write.
-- Writes  DEL of the mark when it is the caller's claim.
-- Complexity O(1).
local mark, fence = KEYS[1], KEYS[2]
local token = ARGV[1]
--@include fence.lua

if not is_token(token) then
  return redis.error_reply('HBARGS want a token')
end

local cur = redis.call('GET', mark)
local now = held_by(fence, token, cur)
if now then
  return { 0, now }
end
if cur then
  redis.call('DEL', mark)
end
return { 1, 0 }
