-- beck.dsl: streams, tables, aggregations, windows and joins, compiled into
-- the processor API of beck.app (no second engine). `beck.app{}` gives every
-- app app:stream and app:table; this module also has the windows, serdes
-- and the counters of late records. See docs/dsl.md.
--
--   local beck = require "beck"
--   local dsl = require "beck.dsl"
--   local app = beck.app { id = "pageviews" }
--   app:stream("pageviews", { value_serde = "json" })
--      :select_key(function(_, view) return view.user end)
--      :group_by_key()
--      :windowed_by(dsl.tumbling(60000):grace(10000))
--      :count { store = "views-per-minute" }
--      :to_stream():to("views-per-minute")
local builder = require "beck.internal.dsl.builder"
local stream = require "beck.internal.dsl.stream"
local tbl = require "beck.internal.dsl.table"
local window = require "beck.internal.dsl.window"
local serde = require "beck.serde"
require "beck.internal.dsl.aggregate"
require "beck.internal.dsl.join"
require "beck.internal.dsl.regroup"
require "beck.internal.dsl.cogroup"
require "beck.internal.dsl.suppress"
require "beck.internal.dsl.fkjoin"
local global = require "beck.internal.dsl.global"

local M = {}

-- -- On the app ----------------------------------------------------------------------

-- app:stream(topic | { topic, ... } [, opts]) -> stream
function M.stream(app, topics, opts)
  return stream.source(app, topics, opts)
end

-- app:table(topic [, opts]) -> table
function M.table(app, topic, opts)
  return tbl.source(app, topic, opts)
end

-- app:global_table(topic [, opts]) -> global table (every node holds all of it)
function M.global_table(app, topic, opts)
  return global.source(app, topic, opts)
end

-- attach(app): gives the app its :stream, :table and :global_table (beck.app does it).
function M.attach(app)
  app.stream, app.table, app.global_table = M.stream, M.table, M.global_table
  return app
end

-- -- Windows ---------------------------------------------------------------------------

M.tumbling = window.tumbling
M.hopping = window.hopping
M.sliding = window.sliding
M.session = window.session
M.join_window = window.join_window

-- -- Serdes and keys ---------------------------------------------------------------------

M.serde = serde
M.windowed = serde.windowed
M.is_windowed = serde.is_windowed

-- window_key(key, start [, second]) -> the store key of a window of `key`
-- (a string): for a time window its start; for a session its end, then its
-- start. parse_window_key(store key) -> key, time, second time (nil for the
-- store's index entries). For reading window stores (driver:store, beck dump).
M.window_key = window.key
M.parse_window_key = window.parse

-- -- Counters ----------------------------------------------------------------------------

-- stats(app) -> { dropped_late = n, by_processor = { [name] = n } }: records
-- (one per window, for hopping windows) dropped as late in this Lua VM (a
-- stream thread, or the test driver).
function M.stats(app)
  local b = builder.get(app)
  if not b then return { dropped_late = 0, by_processor = {} } end
  return b.stats
end

-- info(app, node) -> { op =, where = } of a node the DSL made, or nil.
function M.info(app, node)
  local b = builder.get(app)
  return b and b.info[node]
end

-- is_stream(x), is_table(x)
M.is_stream = stream.is_stream
M.is_table = tbl.is_table

return M
