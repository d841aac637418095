-- scripts/bench/query_wrk.lua: wrk's script for scripts/bench/query. Each request GETs the
-- next key of the file named by $QUERY_KEYS (one URL-safe key a line) from store
-- $QUERY_STORE, round robin, each thread starting at its own place.
local keys, n, i = {}, 0, 0
local store = os.getenv("QUERY_STORE") or "kv"

function init(args)
  for line in io.lines(os.getenv("QUERY_KEYS")) do
    n = n + 1
    keys[n] = "/v1/stores/" .. store .. "/keys/" .. line
  end
  i = math.random(n)
end

function request()
  i = i % n + 1
  return wrk.format("GET", keys[i])
end
