-- beck.internal.dsl.aggregate: grouped streams and their aggregations into key-value
-- stores (count, reduce, aggregate), and the descriptions of aggregations
-- that beck.internal.dsl.window reuses for windows and sessions. A grouping after a
-- key change reads through a repartition topic first.
local builder = require "beck.internal.dsl.builder"
local serde = require "beck.serde"
builder.internal()

local type, error, setmetatable = type, error, setmetatable
local string_format = string.format
local fail, check_fn, check_opts = builder.fail, builder.check_fn, builder.check_opts

local M = {}
local Grouped = {}
Grouped.__index = Grouped

-- grouped(stream, node, kser, vser, repartition, name, where): the records
-- of `node` grouped by their key.
function M.grouped(stream, node, kser, vser, repartition, name, where)
  if name ~= nil and (type(name) ~= "string" or not name:match("^[%w._-]+$")) then
    fail("grouping: name must be letters, digits, '.', '_' or '-'")
  end
  return setmetatable({ b = stream.b, node = node, kser = kser, vser = vser,
                        repartition = repartition, name = name, where = where }, Grouped)
end

-- input(g, proc, store) -> the node an aggregation named `proc` reads: the
-- grouping's node, or the repartition topic that a key change calls for,
-- named after the grouping, else the store the user named, else `proc`.
function M.input(g, proc, user_store)
  if not g.repartition then return g.node end
  if g.input then return g.input end -- a second aggregation of one grouping
  g.input = g.b:repartition(g.node, g.name or user_store or proc, g.kser, g.vser, g.where,
                            { drop_nil_keys = true })
  return g.input
end

-- -- Aggregation descriptions ---------------------------------------------------
-- { op, init = fn() | nil, add = fn(k, v, agg) -> agg, merge = fn(k, a, b)
-- -> agg | nil (sessions), vser }: init nil means "the first value is the
-- aggregate" (reduce).

local function initializer(init, op)
  if type(init) == "function" then return init end
  if type(init) == "table" then
    fail("%s: give the initial aggregate as a function returning a new table (one table " ..
         "would be shared by every key)", op)
  end
  return function() return init end
end

function M.count_desc()
  return { op = "count", vser = serde.number,
           init = function() return 0 end,
           add = function(_, _, agg) return agg + 1 end,
           merge = function(_, a, b) return a + b end }
end

function M.reduce_desc(g, fn, opts)
  check_fn(fn, "reduce")
  return { op = "reduce", vser = g.b:serde(opts.value_serde, g.vser, "reduce: value_serde"),
           add = function(_, v, agg)
             if agg == nil then return v end
             return fn(agg, v)
           end,
           merge = function(_, a, b)
             if a == nil then return b end
             return fn(a, b)
           end }
end

function M.aggregate_desc(g, init, adder, opts)
  check_fn(adder, "aggregate")
  if opts.merger ~= nil then check_fn(opts.merger, "aggregate: merger") end
  return { op = "aggregate", vser = g.b:serde(opts.value_serde, nil, "aggregate: value_serde"),
           init = initializer(init, "aggregate"), add = adder, merge = opts.merger }
end

-- -- Key-value aggregations ---------------------------------------------------------

-- Declares the processor and store of an aggregation; returns its table.
local function kv_aggregate(g, desc, opts)
  local b = g.b
  local where = builder.site()
  if opts.emit ~= nil and opts.emit ~= "update" then
    -- (as Kafka Streams, whose emitStrategy is on windowed aggregations only)
    builder.fail("%s: emit = %s is for windowed aggregations (windowed_by(...)); a " ..
                 "key's aggregate has no window to close", desc.op, tostring(opts.emit))
  end
  local proc = b:name(desc.op, opts.name)
  local input = M.input(g, proc, opts.store)
  local store = opts.store or b:derived(proc .. "-store")
  local kser, vser = g.kser, desc.vser
  local ks, vs, vd = kser.serialize, vser.serialize, vser.deserialize
  local kw = string_format("%s (%s): store %s: key: ", desc.op, where, store)
  local vw = string_format("%s (%s): store %s: value: ", desc.op, where, store)
  local init, add = desc.init, desc.add
  -- (a time to live on the wall clock keeps write times of the clock, not of the records)
  local wall = opts.ttl_clock == "wall"
  b:processor(proc, desc.op, {
    init = function(ctx) ctx.st = ctx:store(store) end,
    -- Records without key or value are dropped, as in Kafka Streams. An aggregate carries
    -- the time of its newest record (its store keeps it), as Kafka Streams stamps one: the
    -- larger of the record's and the aggregate's before it.
    process = function(ctx, k, v)
      if k == nil or v == nil then return end
      local st = ctx.st
      local sk = ks(k, kw)
      local raw, at
      if wall then raw = st:get(sk) else raw, at = st:get_time(sk) end
      local ts = ctx:timestamp()
      local agg
      if raw ~= nil then
        agg = vd(raw, vw)
        if at and at > ts then ts = at end
      elseif init ~= nil then
        agg = init()
      end
      agg = add(k, v, agg)
      if agg == nil then
        st:delete(sk)
      elseif wall then
        st:put(sk, vs(agg, vw))
      else
        st:put_at(sk, vs(agg, vw), ts)
      end
      ctx:forward_at(ts, k, agg)
    end,
  }, { input }, where)
  b:store(store, { changelog = opts.changelog, key_serde = kser.name, value_serde = vser.name,
                  ttl = opts.ttl, ttl_clock = opts.ttl_clock, timestamped = true },
          proc, desc.op, where)
  return builder.module("table").materialized(b, proc, store, kser, vser)
end

-- aggregate_with(g, desc, opts): an aggregation of g by key that a description says
-- (beck.internal.dsl.cogroup's).
M.aggregate_with = kv_aggregate

-- count([opts]) -> table of key -> number. opts: name, store, changelog, and for
-- aggregations by key ttl, ttl_clock (app:store's: a key's aggregate is forgotten ttl ms
-- after its last update).
function Grouped:count(opts)
  return kv_aggregate(self, M.count_desc(), check_opts(opts, "count"))
end

-- reduce(fn(agg, v) -> agg [, opts]): the first value of a key is its
-- aggregate. opts: name, store, changelog, value_serde (default: the
-- grouping's).
function Grouped:reduce(fn, opts)
  opts = check_opts(opts, "reduce")
  return kv_aggregate(self, M.reduce_desc(self, fn, opts), opts)
end

-- aggregate(init, adder(k, v, agg) -> agg [, opts]): init is a value or a
-- function returning one. opts: name, store, changelog, value_serde (of the
-- aggregate; default string).
function Grouped:aggregate(init, adder, opts)
  opts = check_opts(opts, "aggregate")
  return kv_aggregate(self, M.aggregate_desc(self, init, adder, opts), opts)
end

-- cogroup(adder(k, v, agg) -> agg) -> a cogrouping (beck.internal.dsl.cogroup): more
-- groupings join it with :cogroup(grouped, adder), then :aggregate(init [, opts]).
function Grouped:cogroup(adder)
  return builder.module("cogroup").new(self, adder)
end

-- windowed_by(window) -> the grouping in windows (beck.dsl.window).
function Grouped:windowed_by(spec)
  return builder.module("window").windowed(self, spec)
end

builder.provide("aggregate", M)

return M
