#!lua
-- extend.lua: renew the lease of a claimed message, for a delivery that takes long.
-- KEYS[1] mark (see claim.lua)  KEYS[2] fence: the message's token counter
-- ARGV[1] the caller's token (decimal digits)
-- ARGV[2] the new lease in ms from now (>= 1)
-- ARGV[3] how long the counter outlives the lease, in ms (>= 1)
-- Reply   {ok, now}: ok 1 when the token holds the message for the new lease (its
--         claim, or a lapsed lease nobody claimed since, which is taken back); ok 0
--         when it does not, and now says what does: 0 nothing, 2 a claim under
--         another token, 3 delivered (under any token).
-- Errors  HBARGS malformed arguments, raised before any write.
-- Writes  when ok: SET of the mark with PX lease, PEXPIRE of the counter when it
--         would expire before lease + ARGV[3].
-- Complexity O(1).
local mark, fence = KEYS[1], KEYS[2]
local token, lease, fence_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
--@include fence.lua

if not is_token(token) or not ms(lease) or not ms(fence_ms) then
  return redis.error_reply('HBARGS want a token and whole ms >= 1')
end

local now = mark_held(mark, fence, token, redis.call('GET', mark), 'c:', lease, fence_ms)
if now then
  return { 0, now }
end
return { 1, 1 }
