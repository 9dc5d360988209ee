-- blocks.lua: the pop frontier of a shard's pool, for the scripts that open its blocks.
-- Defines  frontier(meta, pool)
-- Errors   HBNOCAMPAIGN the shard does not exist or is loading
-- Writes   none
-- The pool's head holds meta's sealed packets; the packets after them, the opened
-- part, are what grab.lua hands out.
--@include meta.lua

-- frontier returns the length of the pool and how many packets at its head are
-- sealed (meta's sealed, at most the length); or nil, nil and an HBNOCAMPAIGN error.
local function frontier(meta, pool)
  local m, err = live_meta(meta, 'shard', 'sealed')
  if not m then
    return nil, nil, err
  end
  local len = redis.call('LLEN', pool)
  return len, math.min(tonumber(m[2] or '0'), len)
end
