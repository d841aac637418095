-- beck.internal.dsl.regroup: a table re-grouped by another key (Kafka Streams'
-- KGroupedTable) and aggregated with an adder and a subtractor. Each update of
-- the table takes its old row out of the group it was in and puts the new row
-- into its group: the grouping processor keeps the last row of each table key
-- (store <name>-rows) to know the old one, and sends both through a
-- repartition topic as one change when they land in the same group, else
-- the old one's removal first, then the new one's addition, as Kafka Streams
-- does. A row whose selector gives no key or no value joins no group.
local builder = require "beck.internal.dsl.builder"
local serde = require "beck.serde"
local window = require "beck.internal.dsl.window"
builder.internal()

local type, setmetatable = type, setmetatable
local string_format, char, byte, sub = string.format, string.char, string.byte, string.sub
local be32, dec32 = window.be32, window.dec32
local fail, check_fn, check_opts = builder.fail, builder.check_fn, builder.check_opts

local M = {}
local GroupedTable = {}
GroupedTable.__index = GroupedTable

-- A change through the repartition topic: one byte (1: an old value, 2: a new one, 3:
-- both), the old value's length (4 bytes, big-endian) when there is one, the old value,
-- the new one; each serialized by the grouping's value serde.
local function change_serde(vser)
  local vs, vd = vser.serialize, vser.deserialize
  return {
    name = "change(" .. vser.name .. ")",
    serialize = function(c, where)
      local old = c.old ~= nil and vs(c.old, where) or nil
      local new = c.new ~= nil and vs(c.new, where) or nil
      local flags = (old and 1 or 0) + (new and 2 or 0)
      return char(flags) .. (old and (be32(#old) .. old) or "") .. (new or "")
    end,
    deserialize = function(raw, where)
      local flags, c, at = byte(raw, 1) or 0, {}, 2
      if flags % 2 == 1 then
        local n = dec32(raw, 2)
        c.old = vd(sub(raw, 6, 5 + n), where)
        at = 6 + n
      end
      if flags >= 2 then c.new = vd(sub(raw, at), where) end
      return c
    end,
  }
end

-- group_by(t, fn(k, v) -> new key, new value, opts): the grouping. opts: name (of the
-- repartition topic and the rows store), key_serde (default string), value_serde (the
-- new values'; default the table's).
function M.group_by(t, fn, opts)
  check_fn(fn, "table group_by")
  opts = check_opts(opts, "table group_by")
  if opts.name ~= nil and (type(opts.name) ~= "string" or not opts.name:match("^[%w._-]+$")) then
    fail("table group_by: name must be letters, digits, '.', '_' or '-'")
  end
  local b = t.b
  local where = builder.site()
  local kser = b:serde(opts.key_serde, nil, "table group_by: key_serde")
  local vser = b:serde(opts.value_serde, t.vser, "table group_by: value_serde")
  local name = b:name("table_group_by", opts.name)
  local rows = b:derived(name .. "-rows")
  local tks, tvs, tvd = t.kser.serialize, t.vser.serialize, t.vser.deserialize
  local nks = kser.serialize
  local kw = string_format("table group_by (%s): store %s: key: ", where, rows)
  local vw = string_format("table group_by (%s): store %s: value: ", where, rows)
  local gw = string_format("table group_by (%s): new key: ", where)
  -- (new key, new value) of a row, or nil when it joins no group
  local function pair(k, v)
    if v == nil then return nil end
    local nk, nv = fn(k, v)
    if nk == nil or nv == nil then return nil end
    return nk, nv
  end
  b:processor(name, "table_group_by", {
    init = function(ctx) ctx.rows = ctx:store(rows) end,
    process = function(ctx, k, v)
      if k == nil then return end
      local sk = tks(k, kw)
      local raw = ctx.rows:get(sk)
      local old = raw ~= nil and tvd(raw, vw) or nil
      if v == nil then ctx.rows:delete(sk) else ctx.rows:put(sk, tvs(v, vw)) end
      local ok, ov = pair(k, old)
      local nk, nv = pair(k, v)
      if ok ~= nil and nk ~= nil and nks(ok, gw) == nks(nk, gw) then
        ctx:forward(nk, { old = ov, new = nv })
        return
      end
      if ok ~= nil then ctx:forward(ok, { old = ov }) end
      if nk ~= nil then ctx:forward(nk, { new = nv }) end
    end,
  }, { t.node }, where)
  b:store(rows, { changelog = opts.changelog, key_serde = t.kser.name, value_serde = t.vser.name },
          name, "table_group_by", where)
  local input = b:repartition(name, opts.name or name, kser, change_serde(vser), where,
                              { drop_nil_keys = true })
  return setmetatable({ b = b, input = input, kser = kser, vser = vser, where = where },
                      GroupedTable)
end

-- The aggregation: first the old value taken out (when the group has an aggregate), then
-- the new one put in (from init, or for reduce the value itself, when it has none);
-- desc = { op, vser, init | nil, add(k, v, agg), sub(k, v, agg) }.
local function aggregate(g, desc, opts)
  local b = g.b
  local where = builder.site()
  local proc = b:name(desc.op, opts.name)
  local store = opts.store or b:derived(proc .. "-store")
  local ks, vs, vd = g.kser.serialize, desc.vser.serialize, desc.vser.deserialize
  local kw = string_format("%s (%s): store %s: key: ", desc.op, where, store)
  local vw = string_format("%s (%s): store %s: value: ", desc.op, where, store)
  local init, add, subtract = desc.init, desc.add, desc.sub
  b:processor(proc, desc.op, {
    init = function(ctx) ctx.st = ctx:store(store) end,
    -- the result's time as Kafka Streams' KTableAggregate / KTableReduce give it: the
    -- record's, or the larger of it and the aggregate's before when the old value came out
    -- of it or the new one went into it
    process = function(ctx, k, c)
      if k == nil or c == nil then return end
      local sk = ks(k, kw)
      local raw, at = ctx.st:get_time(sk)
      local agg = raw ~= nil and vd(raw, vw) or nil
      local rts = ctx:timestamp()
      local ts, later = rts, raw ~= nil and math.max(rts, at) or rts
      if c.old ~= nil and agg ~= nil then
        agg = subtract(k, c.old, agg)
        ts = later
      end
      if c.new ~= nil then
        if agg == nil and init then agg = init() end
        if agg ~= nil or init then ts = later end
        agg = add(k, c.new, agg)
      end
      if agg == nil then ctx.st:delete(sk) else ctx.st:put_at(sk, vs(agg, vw), ts) end
      ctx:forward_at(ts, k, agg)
    end,
  }, { g.input }, where)
  b:store(store, { changelog = opts.changelog, key_serde = g.kser.name,
                   value_serde = desc.vser.name, timestamped = true }, proc, desc.op, where)
  return builder.module("table").materialized(b, proc, store, g.kser, desc.vser)
end

-- count([opts]): rows per group (a group whose rows all left stays at 0, as in Kafka
-- Streams). opts: name, store, changelog.
function GroupedTable:count(opts)
  return aggregate(self, {
    op = "count", vser = serde.number, init = function() return 0 end,
    add = function(_, _, agg) return agg + 1 end,
    sub = function(_, _, agg) return agg - 1 end,
  }, check_opts(opts, "count"))
end

-- reduce(adder(agg, v) -> agg, subtractor(agg, v) -> agg [, opts]): a group's first value
-- is its aggregate. opts: name, store, changelog, value_serde (default: the grouping's).
function GroupedTable:reduce(adder, subtractor, opts)
  check_fn(adder, "reduce: adder")
  check_fn(subtractor, "reduce: subtractor")
  opts = check_opts(opts, "reduce")
  return aggregate(self, {
    op = "reduce", vser = self.b:serde(opts.value_serde, self.vser, "reduce: value_serde"),
    add = function(_, v, agg)
      if agg == nil then return v end
      return adder(agg, v)
    end,
    sub = function(_, v, agg) return subtractor(agg, v) end,
  }, opts)
end

-- aggregate(init, adder(k, v, agg) -> agg, subtractor(k, v, agg) -> agg [, opts]): init
-- is a value or a function returning one. opts: name, store, changelog, value_serde (of
-- the aggregate; default string).
function GroupedTable:aggregate(init, adder, subtractor, opts)
  check_fn(adder, "aggregate: adder")
  check_fn(subtractor, "aggregate: subtractor")
  opts = check_opts(opts, "aggregate")
  local desc = builder.module("aggregate").aggregate_desc(self, init, adder, opts)
  desc.sub = subtractor
  return aggregate(self, desc, opts)
end

builder.provide("regroup", M)

return M
