-- scripts/bench/repartition.lua - the topology of scripts/bench/repartition: the latest
-- value of every key in the logged store "latest" (a key-value store, as a table's), and
-- a record per input record to "rp-out", so the bench sees when all were processed: empty,
-- or with BENCH_STAMP=1 (the online move's phase) the wall clock in ms when it was
-- processed, from which scripts/bench/repartition_pause.py measures each key's pauses.
local beck = require "beck"
local ffi = require "ffi"

local stamp = os.getenv("BENCH_STAMP") == "1"
if stamp and not pcall(ffi.typeof, "rp_timespec_t") then
  ffi.cdef [[
    typedef struct { long tv_sec; long tv_nsec; } rp_timespec_t;
    int clock_gettime(int clk, rp_timespec_t *ts);
  ]]
end
local ts = stamp and ffi.new("rp_timespec_t")

local function now_ms()
  ffi.C.clock_gettime(0, ts) -- CLOCK_REALTIME
  return string.format("%d", tonumber(ts.tv_sec) * 1000 + math.floor(tonumber(ts.tv_nsec) / 1e6))
end

local app = beck.app { id = "rp-bench" }

app:source("in", "rp-in")
app:processor("latest", {
  init = function(ctx) ctx.latest = ctx:store("latest") end,
  process = function(ctx, k, v)
    ctx.latest:put(k, v)
    ctx:forward(k, stamp and now_ms() or "")
  end,
}, "in")
app:store("latest", "latest")
app:sink("out", "rp-out", "latest")
return app
