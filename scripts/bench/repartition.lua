-- scripts/bench/repartition.lua - the topology of scripts/bench/repartition: the latest
-- value of every key in the logged store "latest" (a key-value store, as a table's), and
-- a record per input record to "rp-out", so the bench sees when all were processed: empty,
-- or with BENCH_STAMP=1 (the online move's phase) the wall clock in ms when it was
-- processed, from which scripts/bench/repartition_pause.py measures each key's pauses.
local beck = require "beck"
local ffi = require "ffi"

local stamp = os.getenv("BENCH_STAMP") == "1"
local upstream = os.getenv("BENCH_UPSTREAM") == "1"
if (stamp or upstream) and not pcall(ffi.typeof, "rp_timespec_t") then
  ffi.cdef [[
    typedef struct { long tv_sec; long tv_nsec; } rp_timespec_t;
    int clock_gettime(int clk, rp_timespec_t *ts);
  ]]
end
local ts = (stamp or upstream) and ffi.new("rp_timespec_t")

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

-- BENCH_UPSTREAM=1 (the online move's phase): an upstream subtopology (subtopology 1: its
-- source comes after rp-in's, so the stateful one stays 0) reads rp-src, forwards each
-- record as it is to rp-in, and stamps the wall clock when it processed it to rp-up, from
-- which the bench measures the upstream's own output gap while subtopology 0 moves.
if upstream then
  app:source("src", "rp-src")
  app:processor("up", {
    process = function(ctx, k, v)
      ctx:forward(k, v, "mid")
      ctx:forward(k, now_ms(), "upout")
    end,
  }, "src")
  app:sink("mid", "rp-in", "up")
  app:sink("upout", "rp-up", "up")
end
return app
