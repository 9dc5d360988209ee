-- fence.lua: the arguments, the holder and the token counter of a message's delivery
-- mark (claim.lua): "c:<token>" while claimed, "d:<token>" once delivered.
-- Defines  ms(x), is_token(s), held_by(fence, token, cur), outlive(fence, want),
--          mark_held(mark, fence, token, cur, st, px, fence_ms)
-- Errors   none
-- Writes   (outlive) PEXPIRE of the counter; (mark_held) SET of the mark, and outlive

-- ms reports whether x (a number or nil) is a whole number of ms >= 1.
local function ms(x)
  return x and x % 1 == 0 and x >= 1
end

-- is_token reports whether s is a token as the counter draws them: decimal digits,
-- no leading zero.
local function is_token(s)
  return string.match(s or '', '^[1-9]%d*$') ~= nil
end

-- held_by returns nil when token holds the message whose mark is cur (false when
-- absent): cur is its claim, or cur is gone (the lease ran out) and the counter still
-- equals token, so nobody claimed since. Else what does: 0 nothing, 2 a claim under
-- another token, 3 delivered (under any token).
local function held_by(fence, token, cur)
  if cur == 'c:' .. token or (not cur and redis.call('GET', fence) == token) then
    return nil
  elseif not cur then
    return 0
  elseif string.sub(cur, 1, 2) == 'd:' then
    return 3
  end
  return 2
end

-- outlive makes the counter live at least want ms more, so that it outlives the mark
-- just written: a later claim then always draws a larger token.
local function outlive(fence, want)
  if redis.call('PTTL', fence) < want then
    redis.call('PEXPIRE', fence, want)
  end
end

-- mark_held sets the mark to st .. token ('c:' a claim, 'd:' delivered) for px ms
-- when token holds the message (held_by, cur the mark as read), and makes the counter
-- outlive it by fence_ms; it returns nil then, else held_by's answer, writing nothing.
local function mark_held(mark, fence, token, cur, st, px, fence_ms)
  local now = held_by(fence, token, cur)
  if now then
    return now
  end
  redis.call('SET', mark, st .. token, 'PX', px)
  outlive(fence, px + fence_ms)
end
