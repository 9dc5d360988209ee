-- refund.lua: when a shard of either kind of campaign may record its refund and be
-- settled (settle.lua, disc_settle.lua).
-- Defines  refund_gate(what, state, refunded, busy, xfers)
-- Errors   HBSTATE not closed, busy, or a transfer out of the shard in flight
-- Writes   none
-- A shard settles once it is closed and nothing of it is on its way elsewhere: what
-- its pool holds then is final, and the refund the ledger recorded must equal it.

-- refund_gate returns what a settle script answers before it checks the refund, or
-- nil when it may go on: {'settled', refunded, 0} when state is settled already
-- (several workers may finish the same campaign); an HBSTATE error when state is not
-- closed ("<what> is <state>"), when busy is a reason (a string) the kind has to wait,
-- or when a transfer out of this shard is in flight (xfers is not empty).
local function refund_gate(what, state, refunded, busy, xfers)
  if state == 'settled' then
    return {'settled', refunded, 0}
  end
  if state ~= 'closed' then
    return redis.error_reply('HBSTATE ' .. what .. ' is ' .. state .. ', not closed')
  end
  if busy then
    return redis.error_reply('HBSTATE ' .. busy)
  end
  if redis.call('HLEN', xfers) > 0 then
    return redis.error_reply('HBSTATE a transfer out of this shard is in flight')
  end
end
