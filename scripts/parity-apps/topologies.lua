-- The topologies of beck's parity harness (scripts/parity, docs/parity.md), each written
-- again with Kafka Streams' DSL in scripts/parity-apps/Parity.java under the same name.
--
--   PARITY_TOPOLOGY=count PARITY_APP=app1 PARITY_INPUT=par-1 PARITY_OUT=app1-out \
--     bin/beck run scripts/parity-apps/topologies.lua -b BROKERS
--
-- Inputs: PARITY_INPUT-in (a stream), -tbl and -right (a table, or a second stream); keys
-- and values are strings, values decimal numbers. Output: PARITY_OUT.
local beck = require "beck"
local dsl = require "beck.dsl"

local name = assert(os.getenv("PARITY_TOPOLOGY"), "PARITY_TOPOLOGY is not set")
local input = assert(os.getenv("PARITY_INPUT"), "PARITY_INPUT is not set")
local out = assert(os.getenv("PARITY_OUT"), "PARITY_OUT is not set")
local app = beck.app { id = assert(os.getenv("PARITY_APP"), "PARITY_APP is not set") }

local IN, TBL, RIGHT = input .. "-in", input .. "-tbl", input .. "-right"

local function pair(l, r)
  return (l == nil and "-" or l) .. "|" .. (r == nil and "-" or r)
end

local function sum(agg, v)
  return tostring(tonumber(agg) + tonumber(v))
end

-- a global table's row for a stream record, a foreign key of a table's row: chosen by
-- its value, not its key
local function global_key(a, b)
  return "k" .. (tonumber(b or a) % 16)
end

-- a stateless step that reads the value (nil passes as nil, as Parity.java's twin does)
local function triple(v)
  return v ~= nil and tostring(tonumber(v) * 3) or nil
end

local join_window = dsl.join_window(2000):grace(1000)
-- the emit-final topologies' retention, as Parity.java's FINAL_RETENTION says why
local FINAL_RETENTION = 73000

local topologies = {
  count = function()
    app:stream(IN):group_by_key():count():to_stream():to(out)
  end,
  reduce = function()
    app:stream(IN):group_by_key():reduce(sum):to_stream():to(out)
  end,
  regroup = function()
    app:stream(IN)
       :select_key(function(_, v) return "g" .. (tonumber(v) % 5) end)
       :group_by_key { name = "regroup" }
       :count():to_stream():to(out)
  end,
  tumbling = function()
    app:stream(IN):group_by_key():windowed_by(dsl.tumbling(10000):grace(3000))
       :count():to_stream():to(out)
  end,
  hopping = function()
    app:stream(IN):group_by_key():windowed_by(dsl.hopping(10000, 5000):grace(2000))
       :count():to_stream():to(out)
  end,
  sliding = function()
    app:stream(IN):group_by_key():windowed_by(dsl.sliding(5000):grace(2000))
       :count():to_stream():to(out)
  end,
  sliding_final = function()
    app:stream(IN):group_by_key():windowed_by(dsl.sliding(5000):grace(2000))
       :count { emit = "final", retention = FINAL_RETENTION }:to_stream():to(out)
  end,
  sliding_reduce = function()
    app:stream(IN):group_by_key():windowed_by(dsl.sliding(3000):grace(1000))
       :reduce(sum):to_stream():to(out)
  end,
  session = function()
    app:stream(IN):group_by_key():windowed_by(dsl.session(3000):grace(2000))
       :count():to_stream():to(out)
  end,
  tumbling_final = function()
    app:stream(IN):group_by_key():windowed_by(dsl.tumbling(10000):grace(3000))
       :count { emit = "final", retention = FINAL_RETENTION }:to_stream():to(out)
  end,
  tumbling_suppress = function()
    app:stream(IN):group_by_key():windowed_by(dsl.tumbling(10000):grace(3000)):count()
       :suppress { ["until"] = "window_close" }:to_stream():to(out)
  end,
  table_suppress = function()
    app:table(TBL):suppress { ["until"] = "time_limit", time_limit_ms = 2000 }
       :to_stream():to(out)
  end,
  cogroup = function()
    app:stream(IN):group_by_key():cogroup(function(_, v, agg) return sum(agg, v) end)
       :cogroup(app:stream(RIGHT):group_by_key(),
                function(_, v, agg) return tostring(tonumber(agg) - tonumber(v)) end)
       :aggregate("0"):to_stream():to(out)
  end,
  tumbling_bytes = function()
    app:stream(IN):group_by_key():windowed_by(dsl.tumbling(10000):grace(3000))
       :count():to_stream():to(out, { key_serde = dsl.serde.time_windowed(10000) })
  end,
  session_final = function()
    app:stream(IN):group_by_key():windowed_by(dsl.session(3000):grace(2000))
       :count { emit = "final", retention = FINAL_RETENTION }:to_stream():to(out)
  end,
  stream_table = function()
    app:stream(IN):join(app:table(TBL), pair):to(out)
  end,
  stream_table_left = function()
    app:stream(IN):left_join(app:table(TBL), pair):to(out)
  end,
  stream_versioned = function()
    app:stream(IN):join(app:table(TBL, { history_retention = 5000 }), pair):to(out)
  end,
  stream_versioned_left = function()
    app:stream(IN):left_join(app:table(TBL, { history_retention = 5000 }), pair):to(out)
  end,
  stream_global = function()
    app:stream(IN):join(app:global_table(TBL), global_key, pair):to(out)
  end,
  stream_global_left = function()
    app:stream(IN):left_join(app:global_table(TBL), global_key, pair):to(out)
  end,
  table_table = function()
    app:table(TBL):join(app:table(RIGHT), pair):to_stream():to(out)
  end,
  table_table_left = function()
    app:table(TBL):left_join(app:table(RIGHT), pair):to_stream():to(out)
  end,
  table_table_outer = function()
    app:table(TBL):outer_join(app:table(RIGHT), pair):to_stream():to(out)
  end,
  fk_join = function()
    app:table(TBL):join(app:table(RIGHT), global_key, pair):to_stream():to(out)
  end,
  fk_left_join = function()
    app:table(TBL):left_join(app:table(RIGHT), global_key, pair):to_stream():to(out)
  end,
  stream_stream = function()
    app:stream(IN):join(app:stream(RIGHT), pair, join_window):to(out)
  end,
  stream_stream_left = function()
    app:stream(IN):left_join(app:stream(RIGHT), pair, join_window):to(out)
  end,
  stream_stream_outer = function()
    app:stream(IN):outer_join(app:stream(RIGHT), pair, join_window):to(out)
  end,
  table_filter = function()
    app:table(TBL):filter(function(_, v) return tonumber(v) % 2 == 0 end):to_stream():to(out)
  end,
  merge = function()
    app:stream(IN):merge(app:stream(RIGHT)):peek(function() end):map_values(triple):to(out)
  end,
  repartition = function()
    app:stream(IN):repartition { name = "rep", partitions = 3 }
       :group_by_key():count():to_stream():to(out)
  end,
  to_fn = function()
    -- even values to PARITY_OUT, odd ones to PARITY_OUT-odd
    app:stream(IN):to(function(_, v) return tonumber(v) % 2 == 0 and out or out .. "-odd" end,
                      { topics = { out, out .. "-odd" } })
  end,
  process_store = function()
    -- the processor API in the middle of a DSL topology, with a store of its own
    app:stream(IN):process({
      process = function(ctx, k, v)
        local st = ctx:store("sums")
        local total = sum(st:get(k) or "0", v)
        st:put(k, total)
        ctx:forward(k, total)
      end,
    }, { stores = { "sums" } }):to(out)
  end,
  table_regroup = function()
    app:table(TBL)
       :group_by(function(_, v) return "g" .. (tonumber(v) % 5), v end, { name = "regroup" })
       :reduce(sum, function(agg, v) return tostring(tonumber(agg) - tonumber(v)) end)
       :to_stream():to(out)
  end,
}

local build = topologies[name]
if not build then error("no parity topology " .. name, 0) end
build()
return app
