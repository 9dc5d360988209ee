-- disc_batch.lua: the start of a discount script that serves a batch of requests
-- (disc_reserve.lua, disc_confirm.lua, disc_cancel.lua): the batch's size, the shard,
-- the layout the caller routed by, and a reply of four integers a request.
-- Defines  disc_batch(width, what, meta, ...)
-- Errors   HBBATCH batch size out of range; HBSHARDS <count> the campaign has another
--          shard count than ARGV[1]
-- Writes   none
--@include outcomes.lua

-- disc_batch reads a batch whose ARGV[1] is the campaign's shard count as the caller
-- knows it and ARGV[2..] n requests of width arguments each (1 <= n <= 1000; what
-- names them in the error), and meta's state, shards and the fields ... (m[1], m[2],
-- m[3]..). It returns false, n, m, the reply out and answer(i, code, seq, cents,
-- exp), which sets request i's four integers in out (exp 0 when nil). When the script
-- ends here it returns only what the script returns: an HBBATCH error; every request
-- answered 6 NO_CAMPAIGN when the shard does not exist or is loading; an HBSHARDS
-- error when the shard count is not the caller's.
local function disc_batch(width, what, meta, ...)
  local n = (#ARGV - 1) / width
  if n < 1 or n > 1000 or n ~= math.floor(n) then
    return redis.error_reply('HBBATCH want 1..1000 ' .. what)
  end
  local out = {}
  local function answer(i, code, seq, cents, exp)
    out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = code, seq, cents, exp or 0
  end
  local m = redis.call('HMGET', meta, 'state', 'shards', ...)
  if not m[1] or m[1] == 'loading' then
    for i = 1, n do
      answer(i, NO_CAMPAIGN, 0, 0, 0)
    end
    return out
  end
  if (m[2] or '1') ~= ARGV[1] then
    return redis.error_reply('HBSHARDS ' .. (m[2] or '1'))
  end
  return false, n, m, out, answer
end
