#!lua
-- redrive.lua: put dead grants back into the grants stream, after an operator
-- fixed what made them fail.
-- KEYS[1] dead stream  KEYS[2] grants stream
-- ARGV[1] most dead entries to move in this call
-- Reply   number of dead entries moved
-- Errors  none
-- Writes  when the dead stream has entries: one XADD to the grants stream of the
--         user, packet pairs of up to ARGV[1] dead entries, then XDEL of those
--         entries (one without a user and packet, as dead.lua writes for an entry
--         without grants, is only deleted).
-- Complexity O(ARGV[1]). The grants go back as one new entry (fields user ->
-- packet, as grab.lua writes them, each packet with its grant's time, the
-- id of the entry it was first in: "seq:cents:ms"), and the dead entries are
-- deleted in the same step, so a grant is never in both streams or in neither.
local dead, grants = KEYS[1], KEYS[2]
local entries = redis.call('XRANGE', dead, '-', '+', 'COUNT', tonumber(ARGV[1]))
local pairs_, ids = {}, {}
for i, e in ipairs(entries) do
  ids[i] = e[1]
  local f = e[2]
  local user, packet, entry
  for j = 1, #f, 2 do
    if f[j] == 'user' then
      user = f[j + 1]
    elseif f[j] == 'packet' then
      packet = f[j + 1]
    elseif f[j] == 'entry' then
      entry = f[j + 1]
    end
  end
  -- The grant's time is its first entry's id (Redis' clock at the grab):
  -- a packet that does not carry one yet takes it along ("seq:cents:ms").
  local ms = entry and string.match(entry, '^(%d+)%-%d+$')
  if packet and ms and string.match(packet, '^%d+:%d+$') then
    packet = packet .. ':' .. ms
  end
  if user and packet then
    pairs_[#pairs_ + 1] = user
    pairs_[#pairs_ + 1] = packet
  end
end
if #ids == 0 then
  return 0
end
if #pairs_ > 0 then
  redis.call('XADD', grants, '*', unpack(pairs_))
end
redis.call('XDEL', dead, unpack(ids))
return #ids
