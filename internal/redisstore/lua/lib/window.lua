-- window.lua: what the open window of a campaign answers a new request, a grab or a
-- reservation alike.
-- Defines  window(now, state, opens_at, closes_at, paused, close_reason, ran_out, paused_code)
-- Errors   none
-- Writes   none

-- window returns false while the campaign takes new requests: open (scheduled or
-- open, now in [opens_at, closes_at), by the Redis clock) and not paused. Else the
-- answer of a request that holds nothing yet: 4 NOT_OPEN before opens_at; 5 CLOSED
-- from closes_at on, or once closed; paused_code while paused (1) in the window; 3
-- once closed with close_reason ran_out (its pool ran out: sold_out, exhausted).
local function window(now, state, opens_at, closes_at, paused, close_reason, ran_out, paused_code)
  if state == 'scheduled' or state == 'open' then
    if now < tonumber(opens_at) then
      return 4
    elseif now >= tonumber(closes_at) then
      return 5
    elseif paused == '1' then
      return paused_code
    end
    return false
  elseif close_reason == ran_out then
    return 3
  end
  return 5
end
