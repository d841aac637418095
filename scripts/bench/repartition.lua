-- scripts/bench/repartition.lua - the topology of scripts/bench/repartition: the latest
-- value of every key in the logged store "latest" (a key-value store, as a table's), and
-- an empty record per input record to "rp-out", so the bench sees when all were processed.
local beck = require "beck"

local app = beck.app { id = "rp-bench" }

app:source("in", "rp-in")
app:processor("latest", {
  init = function(ctx) ctx.latest = ctx:store("latest") end,
  process = function(ctx, k, v)
    ctx.latest:put(k, v)
    ctx:forward(k, "")
  end,
}, "in")
app:store("latest", "latest")
app:sink("out", "rp-out", "latest")
return app
