-- beck.internal.dsl.cogroup: several groupings aggregated into one store, each with its
-- own adder (Kafka Streams' cogroup, KIP-150):
--
--   local t = clicks:group_by_key():cogroup(add_click)
--                   :cogroup(views:group_by_key(), add_view)
--                   :aggregate(function() return "0" end, { store = "activity" })
--
-- Each grouping reads through its own repartition topic when its key changed. A record of
-- grouping i is tagged with i, the tagged records of all of them are merged into one node
-- (their inputs become one subtopology, so their topics need as many partitions, as for a
-- join), and one aggregation over the merged node calls the adder of the record's grouping.
-- The tag is a table the record carries between two nodes of one thread, never serialized.
local builder = require "beck.internal.dsl.builder"
builder.internal()

local type, setmetatable, ipairs, pairs = type, setmetatable, ipairs, pairs
local fail, check_fn, check_opts = builder.fail, builder.check_fn, builder.check_opts

local M = {}
local Cogrouped = {}
Cogrouped.__index = Cogrouped

local function is_grouped(g)
  return type(g) == "table" and g.kser ~= nil and g.node ~= nil and g.b ~= nil and
         g.windowed_by ~= nil and g.cogroup ~= nil
end

-- new(g, adder) -> the cogrouping of g alone (grouped:cogroup).
function M.new(g, adder)
  check_fn(adder, "cogroup")
  return setmetatable({ b = g.b, kser = g.kser, parts = { { g = g, add = adder } },
                        where = builder.site() }, Cogrouped)
end

-- cogroup(grouped, adder(k, v, agg) -> agg): one more grouping, with its adder.
function Cogrouped:cogroup(g, adder)
  if not is_grouped(g) then
    fail("cogroup: expected a grouped stream (stream:group_by_key() or group_by(fn)), got %s",
         type(g))
  end
  if g.b ~= self.b then fail("cogroup: the grouping belongs to another app") end
  check_fn(adder, "cogroup")
  local parts = {}
  for i, p in ipairs(self.parts) do parts[i] = p end
  parts[#parts + 1] = { g = g, add = adder }
  return setmetatable({ b = self.b, kser = self.kser, parts = parts, where = self.where },
                      Cogrouped)
end

-- The merged node of tagged records, as a grouping the aggregations take: no key change
-- past it (each part was repartitioned already where it needed it).
local function merged(cg, name)
  local b = cg.b
  local where = builder.site()
  local agg = builder.module("aggregate")
  local tags = {}
  for i, p in ipairs(cg.parts) do
    local input = agg.input(p.g, name .. "-" .. i, nil)
    local tag = { i }
    -- records without key or value are dropped, as every aggregation drops them
    tags[i] = b:processor(b:derived(name .. "-tag-" .. i), "cogroup", {
      process = function(ctx, k, v)
        if k == nil or v == nil then return end
        tag[2] = v -- (the aggregation reads it before forward returns)
        ctx:forward(k, tag)
      end,
    }, { input }, where)
  end
  local node = b:processor(b:derived(name .. "-merge"), "cogroup", builder.PASS, tags, where)
  return agg.grouped({ b = b }, node, cg.kser, nil, false, nil, where)
end

-- The description of the aggregation: the adder of the record's part.
local function desc_of(cg, init, opts)
  local agg = builder.module("aggregate")
  local adders = {}
  for i, p in ipairs(cg.parts) do adders[i] = p.add end
  local d = agg.aggregate_desc({ b = cg.b }, init, function(k, tv, a)
    return adders[tv[1]](k, tv[2], a)
  end, opts)
  d.op = "cogroup"
  return d
end

-- opts with the aggregation's name: the tag and merge nodes are named after it.
local function named(opts, name)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.name = name
  return o
end

-- aggregate(init [, opts]) -> table: opts as a grouping's aggregate (name, store, changelog,
-- value_serde, ttl).
function Cogrouped:aggregate(init, opts)
  opts = check_opts(opts, "cogroup aggregate")
  local name = self.b:name("cogroup", opts.name)
  local g = merged(self, name)
  return builder.module("aggregate").aggregate_with(g, desc_of(self, init, opts),
                                                    named(opts, name))
end

-- windowed_by(spec):aggregate(init [, opts]): the same over windows (opts.merger for
-- sessions, opts.emit, opts.retention as on any windowed aggregation).
function Cogrouped:windowed_by(spec)
  local cg = self
  return {
    aggregate = function(_, init, opts)
      opts = check_opts(opts, "cogroup aggregate")
      local name = cg.b:name("cogroup", opts.name)
      local w = builder.module("window").windowed(merged(cg, name), spec)
      return builder.module("window").aggregate_with(w, desc_of(cg, init, opts),
                                                     named(opts, name))
    end,
  }
end

builder.provide("cogroup", M)

return M
