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

if not string.match(token or '', '^[1-9]%d*$') then
  return redis.error_reply('HBARGS want a token')
end

local cur = redis.call('GET', mark)
if cur == 'c:' .. token then
  redis.call('DEL', mark)
  return { 1, 0 }
end
if not cur then
  if redis.call('GET', fence) == token then
    return { 1, 0 }
  end
  return { 0, 0 }
elseif string.sub(cur, 1, 2) == 'd:' then
  return { 0, 3 }
end
return { 0, 2 }
