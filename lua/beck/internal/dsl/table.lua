-- beck.internal.dsl.table: tables of the DSL (Kafka Streams' KTable): the latest
-- value per key. A table's node forwards (key, new value) for every update,
-- nil for a deletion. Tables that joins read have a getter: the value of a
-- key now, read from a store, or computed through filter / map_values from
-- the store of the table they derive from (no store of their own needed).
local builder = require "beck.internal.dsl.builder"
local versioned = require "beck.internal.versioned"
builder.internal()

local type, setmetatable, getmetatable, ipairs = type, setmetatable, getmetatable, ipairs
local string_format = string.format
local check_fn, check_opts, fail = builder.check_fn, builder.check_opts, builder.fail

local M = {}
local Table = {}
Table.__index = Table
M.Table = Table

function M.is_table(x)
  return getmetatable(x) == Table
end

-- A table whose values are in `store` (raw: the store holds the topic's
-- bytes, vser reads them). getter(ctx) -> function(key) -> value | nil.
function M.materialized(b, node, store, kser, vser, windowed)
  local t = setmetatable({ b = b, node = node, store = store, kser = kser, vser = vser,
                          stores = { store }, windowed = windowed or false }, Table)
  local ks, vd = kser.serialize, vser.deserialize
  local kw = string_format("table %s: store %s: key: ", node, store)
  local vw = string_format("table %s: store %s: value: ", node, store)
  function t.getter(ctx)
    local st = ctx:store(store)
    return function(k)
      local raw, at = st:get_time(ks(k, kw))
      if raw ~= nil then return vd(raw, vw), at end
      return nil
    end
  end
  return t
end

-- needs(t, proc): connects proc to every store t's getter reads.
function Table:needs(proc)
  for _, s in ipairs(self.stores) do self.b:use_store(s, proc) end
end

-- A versioned table's source (opts.history_retention, Kafka Streams' versioned store,
-- KIP-889/914): every version kept by its timestamp; an update older than the key's latest
-- version is kept for reads as of its time but not forwarded (nor is one older than the
-- history retention, which is not kept either).
local function versioned_source_def(store, kser, vser, what, retention)
  local kd, vd, ks = kser.deserialize, vser.deserialize, kser.serialize
  local kw, vw = what .. ": key: ", what .. ": value: "
  local canon = not kser.identity
  return {
    init = function(ctx)
      ctx.vst = versioned.of(ctx:store(store), retention, ctx:stream_time())
      ctx:schedule(math.max(1, math.floor(retention / 2)), function() ctx.vst:expire() end,
                   "stream")
    end,
    process = function(ctx, rk, raw)
      if rk == nil then return end
      local k = kd(rk, kw)
      if canon then rk = ks(k, kw) end
      local had = ctx.vst:get(rk) ~= nil
      if ctx.vst:put(rk, raw, ctx:timestamp()) ~= versioned.IS_LATEST then return end
      local task = ctx._task
      task.had_row = had
      ctx:forward(k, raw ~= nil and vd(raw, vw) or nil)
      task.had_row = nil
    end,
  }
end

-- The table source: the latest value per key of a topic.
local function source_def(store, kser, vser, what)
  local kd, vd, ks = kser.deserialize, vser.deserialize, kser.serialize
  local kw, vw = what .. ": key: ", what .. ": value: "
  local canon = not kser.identity
  return {
    init = function(ctx) ctx.st = ctx:store(store) end,
    process = function(ctx, rk, raw)
      if rk == nil then return end -- no key, no row (as Kafka Streams)
      local k = kd(rk, kw)
      if canon then rk = ks(k, kw) end
      if raw == nil then
        -- whether the row was there: a table-table join forwards nothing for a tombstone
        -- of a row that never was when the other side has none either (Kafka Streams)
        local task = ctx._task
        task.had_row = ctx.st:get(rk) ~= nil
        ctx.st:delete(rk)
        ctx:forward(k, nil)
        task.had_row = nil
      else
        local v = vd(raw, vw)
        ctx.st:put(rk, raw)
        ctx:forward(k, v)
      end
    end,
  }
end

-- app:table(topic [, opts]): opts.name (of its processor), store,
-- changelog, key_serde, value_serde, ttl, ttl_clock (app:store's).
function M.source(app, topic, opts)
  local b = builder.of(app)
  opts = check_opts(opts, "table")
  local where = builder.site()
  local kser = b:serde(opts.key_serde, nil, "table: key_serde")
  local vser = b:serde(opts.value_serde, nil, "table: value_serde")
  local name = b:name("table", opts.name)
  local src = b:source(b:derived(name .. "-source"), topic, nil, "table", where)
  local store = opts.store or b:derived(name .. "-store")
  local retention = opts.history_retention
  if retention ~= nil then
    if type(retention) ~= "number" or retention < 0 or retention ~= math.floor(retention) then
      fail("table: history_retention: expected a whole number of ms >= 0, got %s",
           tostring(retention))
    end
    if opts.ttl ~= nil then fail("table: a versioned table (history_retention) has no ttl") end
    b:processor(name, "table", versioned_source_def(store, kser, vser,
                                                    "table " .. tostring(topic), retention),
                { src }, where)
    b:store(store, { changelog = opts.changelog, kind = "versioned",
                     history_retention = retention, key_serde = kser.name,
                     value_serde = vser.name }, name, "table", where)
    return M.versioned(b, name, store, kser, vser, retention)
  end
  b:processor(name, "table", source_def(store, kser, vser, "table " .. tostring(topic)), { src },
              where)
  -- (each row keeps its record's time: a table-table join's result carries the later of
  -- its two rows', as in Kafka Streams)
  b:store(store, { changelog = opts.changelog, ttl = opts.ttl, ttl_clock = opts.ttl_clock,
                   key_serde = kser.name, value_serde = vser.name,
                   timestamped = opts.ttl_clock ~= "wall" }, name, "table", where)
  return M.materialized(b, name, store, kser, vser)
end

-- A versioned table: its getter reads the latest version, getter_as_of(ctx)(k, time) the
-- version valid at a time (a stream-table join's lookup, at the stream record's time).
function M.versioned(b, node, store, kser, vser, retention)
  local t = setmetatable({ b = b, node = node, store = store, kser = kser, vser = vser,
                          stores = { store }, windowed = false, versioned = true }, Table)
  local ks, vd = kser.serialize, vser.deserialize
  local kw = string_format("table %s: store %s: key: ", node, store)
  local vw = string_format("table %s: store %s: value: ", node, store)
  local function of(ctx) return versioned.of(ctx:store(store), retention, ctx:stream_time()) end
  function t.getter(ctx)
    local vst = of(ctx)
    return function(k)
      local raw, at = vst:get(ks(k, kw))
      if raw ~= nil then return vd(raw, vw), at end
      return nil
    end
  end
  function t.getter_as_of(ctx)
    local vst = of(ctx)
    return function(k, at)
      local raw = vst:get_as_of(ks(k, kw), at)
      if raw ~= nil then return vd(raw, vw) end
      return nil
    end
  end
  return t
end

-- stream:to_table(opts): the stream's latest value per key (after a
-- repartition when its key changed).
function M.from_stream(s, opts, where)
  local b = s.b
  local name = b:name("to_table", opts.name)
  local input = s.node
  local kser = b:serde(opts.key_serde, s.kser, "to_table: key_serde")
  local vser = b:serde(opts.value_serde, s.vser, "to_table: value_serde")
  if s.key_changed then
    input = b:repartition(s.node, name, kser, vser, where, { drop_nil_keys = true })
  end
  local store = opts.store or b:derived(name .. "-store")
  local ks, vs = kser.serialize, vser.serialize
  local kw = string_format("to_table (%s): store %s: key: ", where, store)
  local vw = string_format("to_table (%s): store %s: value: ", where, store)
  b:processor(name, "to_table", {
    init = function(ctx) ctx.st = ctx:store(store) end,
    process = function(ctx, k, v)
      if k == nil then return end
      local task = ctx._task
      if v == nil then
        local sk = ks(k, kw)
        task.had_row = ctx.st:get(sk) ~= nil -- (as the table source: a join reads it)
        ctx.st:delete(sk)
      else
        ctx.st:put(ks(k, kw), vs(v, vw))
      end
      ctx:forward(k, v)
      task.had_row = nil
    end,
  }, { input }, where)
  b:store(store, { changelog = opts.changelog, ttl = opts.ttl, ttl_clock = opts.ttl_clock,
                   key_serde = kser.name, value_serde = vser.name }, name, "to_table", where)
  return M.materialized(b, name, store, kser, vser)
end

-- -- Derived tables ------------------------------------------------------------------

-- derive(self, op, opts, compute, vser): a table whose value for a key is
-- compute(k, parent value) (nil: no row). Materialized when opts.store
-- names a store; otherwise its getter computes from the parent's.
local function derive(self, op, opts, compute, vser)
  local b = self.b
  local where = builder.site()
  local name = b:name(op, opts.name)
  local store = opts.store
  local ks, vs = self.kser.serialize, vser.serialize
  local kw = string_format("%s (%s): store %s: key: ", op, where, tostring(store))
  local vw = string_format("%s (%s): store %s: value: ", op, where, tostring(store))
  b:processor(name, op, {
    init = function(ctx) if store then ctx.st = ctx:store(store) end end,
    process = function(ctx, k, v)
      local out = nil
      if v ~= nil then out = compute(k, v) end
      local st = ctx.st
      if st then
        if out == nil then st:delete(ks(k, kw)) else st:put(ks(k, kw), vs(out, vw)) end
      end
      ctx:forward(k, out)
    end,
  }, { self.node }, where)
  if store then
    b:store(store, { changelog = opts.changelog, key_serde = self.kser.name,
                     value_serde = vser.name }, name, op, where)
    return M.materialized(b, name, store, self.kser, vser, self.windowed)
  end
  local parent = self
  local t = setmetatable({ b = b, node = name, kser = self.kser, vser = vser,
                          stores = self.stores, windowed = self.windowed }, Table)
  function t.getter(ctx)
    local pg = parent.getter(ctx)
    return function(k)
      local v, at = pg(k)
      if v ~= nil then
        local out = compute(k, v)
        if out ~= nil then return out, at end
      end
      return nil
    end
  end
  return t
end

-- filter(pred(k, v) [, opts]): the rows for which pred holds; an update
-- that fails it deletes the row downstream (a nil value). opts: name, store.
function Table:filter(pred, opts)
  check_fn(pred, "table filter")
  return derive(self, "filter", check_opts(opts, "filter"), function(k, v)
    if pred(k, v) then return v end
    return nil
  end, self.vser)
end

function Table:filter_not(pred, opts)
  check_fn(pred, "table filter_not")
  return derive(self, "filter_not", check_opts(opts, "filter_not"), function(k, v)
    if not pred(k, v) then return v end
    return nil
  end, self.vser)
end

-- map_values(fn(v, k) -> v2 [, opts]): opts: name, store, value_serde.
function Table:map_values(fn, opts)
  check_fn(fn, "table map_values")
  opts = check_opts(opts, "map_values")
  return derive(self, "map_values", opts, function(k, v) return fn(v, k) end,
                self.b:serde(opts.value_serde, nil, "map_values: value_serde"))
end

-- to_stream(): the table's updates as a stream (a deletion: a nil value).
function Table:to_stream()
  return builder.module("stream").new(self.b, self.node, self.kser, self.vser, false)
end

-- group_by(fn(k, v) -> new key, new value [, opts]): the rows re-grouped, to be
-- aggregated with an adder and a subtractor (beck.internal.dsl.regroup).
function Table:group_by(fn, opts)
  return builder.module("regroup").group_by(self, fn, opts)
end

-- suppress(opts): the updates held back until their window closes or a time limit
-- passes (beck.internal.dsl.suppress).
function Table:suppress(opts)
  return builder.module("suppress").suppress(self, opts)
end

-- to(topic [, opts]): to_stream():to(topic, opts).
function Table:to(topic, opts)
  return self:to_stream():to(topic, opts)
end

-- join(table, joiner(v, ov, k) [, opts]), left_join, outer_join.
-- join(table, joiner(l, r, k) [, opts]), or with a foreign key: join(table,
-- fk_extractor(l), joiner(l, r, k) [, opts]) (beck.internal.dsl.fkjoin); left_join likewise.
function Table:join(other, joiner, opts, fk_opts)
  return builder.module("join").table_join(self, other, joiner, opts, "join", fk_opts)
end

function Table:left_join(other, joiner, opts, fk_opts)
  return builder.module("join").table_join(self, other, joiner, opts, "left_join", fk_opts)
end

function Table:outer_join(other, joiner, opts)
  return builder.module("join").table_join(self, other, joiner, opts, "outer_join")
end

builder.provide("table", M)

return M
