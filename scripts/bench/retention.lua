-- The topology of scripts/bench/retention: counts records by key in the logged store
-- "counts". The bench writes keys that never come back (a rotating key space), so a
-- compacted changelog keeps every one of them and only a bounded one stops growing.
local beck = require "beck"

local app = beck.app { id = "retention" }

app:stream("ret-in"):group_by_key():count { store = "counts" }:to("ret-out")

return app
