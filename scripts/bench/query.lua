-- scripts/bench/query.lua: the state scripts/bench/query reads. Each input record puts its
-- key and value into the logged store "kv", so that a key lives in the task of the
-- partition Kafka's murmur2 gave it, where the query server looks for it.
local beck = require "beck"

local app = beck.app { id = "qbench" }

app:source("in", "qbench-in")

app:processor("put", {
  init = function(ctx) ctx.kv = ctx:store("kv") end,
  process = function(ctx, key, value) ctx.kv:put(key, value) end,
}, "in")

app:store("kv", "put")

return app
