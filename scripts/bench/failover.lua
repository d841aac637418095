-- scripts/bench/failover.lua - the topology of scripts/bench/failover.
--
-- Input "failover-in": key i (a decimal integer), value n. Writes the n keys
-- i*100 .. i*100+n-1 (8 digits each) with a 20-byte value into the logged store
-- "state" (changelog failover-bench-state-changelog, or <--id>-state-changelog),
-- then forwards one record (i, n) to "failover-out", so that the first record a
-- task processes after a takeover shows in the log ("first record" line) and in
-- the output. The bench loads the state with n = 100 (10,000 records: 1,000,000
-- keys) and trickles n = 1 records (an overwrite of one existing key) during the
-- kill. Each record must go to the partition whose task owns its keys; the bench
-- writes record i to partition i % P.
local beck = require "beck"

local app = beck.app { id = "failover-bench" }

app:source("in", "failover-in")

app:processor("build", {
  init = function(ctx) ctx.state = ctx:store("state") end,
  process = function(ctx, key, value)
    local i, n = tonumber(key), tonumber(value)
    if not i or not n then error("want a numeric key and value, got " .. tostring(key)) end
    local st, base = ctx.state, i * 100
    for j = 0, n - 1 do
      -- 8-byte key, 20-byte value
      st:put(string.format("%08d", base + j), string.format("v%08d-%010d", i, ctx:offset() % 1e10))
    end
    ctx:forward(key, value)
  end,
}, "in")

app:store("state", "build")

app:sink("out", "failover-out", "build")

return app
