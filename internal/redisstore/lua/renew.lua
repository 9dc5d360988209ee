#!lua
-- renew.lua: renew, or give up, the hold a create keeps on the campaign it is loading.
-- KEYS[1] meta (of the campaign's root)
-- ARGV[1] load token
-- ARGV[2] how long the hold lasts from now, ms; 0 gives it up (another create may take
--         the load over at once)
-- Reply   1
-- Errors  HBSTALE the campaign is not loading under this token: another create took the
--         load over, or it went live; HBARGS a hold that is not an integer of at least 0
-- Writes  HSET of load_until in meta (Redis clock + ARGV[2])
-- Complexity O(1). The loader renews between its steps that are not scripts on the
-- root (loading other shards, recording the packets in the ledger, registering), so a
-- live loader keeps the campaign while another create of it waits (begin.lua); a
-- loader that failed gives the hold up, so that a retry need not wait for it to lapse.
local meta = KEYS[1]
local token, hold = ARGV[1], tonumber(ARGV[2])
--@include loader.lua

if not hold or hold < 0 or hold % 1 ~= 0 then
  return redis.error_reply('HBARGS the hold must be an integer of at least 0')
end
local m = redis.call('HMGET', meta, 'state', 'load_token')
if m[1] ~= 'loading' or m[2] ~= token then
  return redis.error_reply('HBSTALE the load was taken over or the campaign is not loading')
end
renew_hold(meta, hold)
return 1
