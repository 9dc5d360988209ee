-- window.lua: what the open window of a campaign answers a new request, a grab or a
-- reservation alike.
-- Defines  window(now, state, opens_at, closes_at, paused, close_reason, ran_out)
-- Errors   none
-- Writes   none
--@include outcomes.lua

-- window returns false while the campaign takes new requests: open (scheduled or
-- open, now in [opens_at, closes_at), by the Redis clock) and not paused. Else the
-- answer of a request that holds nothing yet: NOT_OPEN before opens_at; CLOSED from
-- closes_at on, or once closed; PAUSED while paused (1) in the window; RAN_OUT once
-- closed with close_reason ran_out (its pool ran out: sold_out, exhausted).
local function window(now, state, opens_at, closes_at, paused, close_reason, ran_out)
  if state == 'scheduled' or state == 'open' then
    if now < tonumber(opens_at) then
      return NOT_OPEN
    elseif now >= tonumber(closes_at) then
      return CLOSED
    elseif paused == '1' then
      return PAUSED
    end
    return false
  elseif close_reason == ran_out then
    return RAN_OUT
  end
  return CLOSED
end
