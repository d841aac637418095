-- The topology of scripts/bench/soak: counts records by key in the logged store "counts"
-- (with its changelog, and a standby per task) and writes each new count to soak-out.
local beck = require "beck"

local app = beck.app { id = "soak" }

app:stream("soak-in"):group_by_key():count { store = "counts" }:to("soak-out")

return app
