-- grab.lua: a wrk script for hongbao serve. Every request is a grab,
--   POST /v1/campaigns/<campaign>/grab  with  Authorization: Bearer <token>,
-- taking the pre-minted user tokens in turn (each wrk thread starts at its
-- own offset), and the outcome mix is counted from the answers.
--
-- Usage:
--   hongbao bench --mode http --token-secret-file F --users 100000 --tokens-out tokens.txt
--   wrk -t2 -c64 -d10s -s deploy/wrk/grab.lua http://127.0.0.1:8080 -- tokens.txt CAMPAIGN_ID
--
-- The same script against a trivial handler (hongbao bench --mode http
-- --trivial-listen ADDR) measures the floor of a Go HTTP service.

local threads = {}
local nthreads = 0

function setup(thread)
  thread:set("id", nthreads)
  nthreads = nthreads + 1
  table.insert(threads, thread)
end

function init(args)
  local file, campaign = args[1], args[2]
  if not file or not campaign then
    error("usage: wrk ... -s grab.lua URL -- TOKENS_FILE CAMPAIGN_ID")
  end
  tokens = {}
  for line in io.lines(file) do
    if #line > 0 then tokens[#tokens + 1] = line end
  end
  if #tokens == 0 then error("no tokens in " .. file) end
  path = "/v1/campaigns/" .. campaign .. "/grab"
  -- Threads start far apart in the token list.
  n = (id * 7919) % #tokens
  outcomes = {}
end

function request()
  n = n + 1
  local tok = tokens[(n % #tokens) + 1]
  return wrk.format("POST", path, { ["Authorization"] = "Bearer " .. tok, ["Content-Length"] = "0" }, nil)
end

function response(status, headers, body)
  local o = string.match(body, '"outcome":"([a-z_]+)"') or ("http_" .. status)
  outcomes[o] = (outcomes[o] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    local o = t:get("outcomes")
    if o then
      for k, v in pairs(o) do total[k] = (total[k] or 0) + v end
    end
  end
  local keys = {}
  for k in pairs(total) do keys[#keys + 1] = k end
  table.sort(keys)
  io.write("outcomes:")
  for _, k in ipairs(keys) do io.write(string.format(" %s %d", k, total[k])) end
  io.write("\n")
  io.write(string.format("latency p50 %.2f ms  p90 %.2f ms  p99 %.2f ms\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000))
end
