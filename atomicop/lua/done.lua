#!lua
-- done.lua: confirm that a message was delivered, keeping the mark for a while.
-- KEYS[1] mark (see claim.lua)  KEYS[2] fence: the message's token counter
-- ARGV[1] the caller's token (decimal digits)
-- ARGV[2] keep: how long the delivered mark lives, in ms (>= 1)
-- ARGV[3] how long the counter outlives the mark, in ms (>= 1)
-- Reply   {ok, now}: ok 1 when the message is marked delivered under this token (by
--         this call, or by an earlier Done with the same token, which is left as it
--         is); ok 0 when the token does not hold the message, and now says what
--         does: 0 nothing (free), 2 a claim under another token, 3 delivered under
--         another token.
-- Errors  HBARGS malformed arguments, raised before any write.
-- Writes  when ok and not yet delivered: SET of the mark to "d:<token>" with PX keep,
--         PEXPIRE of the counter when it would expire before the mark.
-- Complexity O(1).
-- The token holds the message when the mark is its claim, or when the mark is gone
-- (the lease ran out) and the counter still equals the token: nobody claimed since,
-- so this worker's delivery is the only one and confirming it is safe.
local mark, fence = KEYS[1], KEYS[2]
local token, keep, fence_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
--@include fence.lua

if not is_token(token) or not ms(keep) or not ms(fence_ms) then
  return redis.error_reply('HBARGS want a token and whole ms >= 1')
end

local cur = redis.call('GET', mark)
if cur == 'd:' .. token then
  return { 1, 3 }
end
local now = mark_held(mark, fence, token, cur, 'd:', keep, fence_ms)
if now then
  return { 0, now }
end
return { 1, 3 }
