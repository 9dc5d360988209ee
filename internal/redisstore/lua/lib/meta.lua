-- meta.lua: read the meta hash of a campaign, or of one shard, that a script serves.
-- Defines  live_meta(meta, what, ...)
-- Errors   HBNOCAMPAIGN the campaign (shard) does not exist or is loading
-- Writes   none
-- A loading campaign has never answered a grab or a reservation; every script but
-- those that load or rebuild it treats it as absent.

-- live_meta reads meta's state and the fields ... (m[1] the state, m[2].. the fields)
-- of a campaign that exists and is past loading; else it returns nil and the error
-- reply HBNOCAMPAIGN "no such <what>".
local function live_meta(meta, what, ...)
  local m = redis.call('HMGET', meta, 'state', ...)
  if not m[1] or m[1] == 'loading' then
    return nil, redis.error_reply('HBNOCAMPAIGN no such ' .. what)
  end
  return m
end
