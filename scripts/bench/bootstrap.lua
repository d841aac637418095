-- scripts/bench/bootstrap.lua - the topology of scripts/bench/bootstrap.
--
-- Input "bootstrap-in": key i (a decimal integer), value "r k b". Writes the k keys
-- i*k .. i*k+k-1 (8 digits each) with a b-byte value into the logged store "state"
-- (changelog bootstrap-bench-state-changelog). The value names the key and the round r,
-- then fills up to b bytes from a fixed random alphabet string at an offset that depends on
-- key and round, so that RocksDB's and the broker's compression find little to squeeze and
-- each round's value differs. The bench writes record i to partition i % P and loads the
-- same i range r = 1..R times, so each key is updated R times and the changelog (the dev
-- broker never compacts) holds all R versions.
local beck = require "beck"

local app = beck.app { id = "bootstrap-bench" }

-- 8 KiB of letters and digits from a fixed seed: every node builds the same string
local ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
local FILL
do
  math.randomseed(8)
  local t = {}
  for j = 1, 8192 do
    local c = math.random(1, #ALPHABET)
    t[j] = ALPHABET:sub(c, c)
  end
  FILL = table.concat(t)
end

app:source("in", "bootstrap-in")

app:processor("build", {
  init = function(ctx) ctx.state = ctx:store("state") end,
  process = function(ctx, key, value)
    local i = tonumber(key)
    local r, k, b = (value or ""):match("^(%d+) (%d+) (%d+)$")
    r, k, b = tonumber(r), tonumber(k), tonumber(b)
    if not i or not r or b > 4096 then
      error("want key i and value \"round keys bytes\", got " .. tostring(key) .. "="
            .. tostring(value))
    end
    local st, base = ctx.state, i * k
    for j = 0, k - 1 do
      local id = base + j
      local head = string.format("%08d r%d ", id, r)
      local at = (id * 7919 + r * 104729) % (8192 - b) + 1
      st:put(string.format("%08d", id), head .. FILL:sub(at, at + b - #head - 1))
    end
  end,
}, "in")

app:store("state", "build")

return app
