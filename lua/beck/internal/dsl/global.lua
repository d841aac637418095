-- beck.internal.dsl.global: global tables (Kafka Streams' GlobalKTable) and the stream
-- joins against them. app:global_table(topic, opts) declares one (beck.app's
-- global_store: every node holds all of it); stream:join(global, key_selector, joiner) and
-- left_join look a row up by the key the selector makes from each record. No repartition
-- and no co-partitioning: every task sees the whole table (docs/dsl.md, "Global tables").
local builder = require "beck.internal.dsl.builder"
local stream_mod = require "beck.internal.dsl.stream"
builder.internal()

local setmetatable, getmetatable, type = setmetatable, getmetatable, type
local string_format = string.format
local fail, check_fn, check_opts = builder.fail, builder.check_fn, builder.check_opts

local M = {}

local GlobalTable = {}
GlobalTable.__index = GlobalTable

function M.is_global(x)
  return getmetatable(x) == GlobalTable
end

-- app:global_table(topic [, opts]) -> global table. opts: name (its store's, for queries
-- and ctx:store; default "<topic>-global"), key_serde, value_serde.
function M.source(app, topic, opts)
  local b = builder.of(app)
  b:check_open()
  opts = check_opts(opts, "global_table")
  if type(topic) ~= "string" or topic == "" then
    fail("global_table: the topic must be a non-empty string")
  end
  local kser = b:serde(opts.key_serde, nil, "global_table: key_serde")
  local vser = b:serde(opts.value_serde, nil, "global_table: value_serde")
  local name = opts.name or (topic .. "-global")
  local ok, err = pcall(app.global_store, app, name, topic,
                        { key_serde = kser.name, value_serde = vser.name })
  if not ok then fail("%s", (tostring(err):gsub("^[^:]*:%d+: ", ""))) end
  return setmetatable({ b = b, name = name, topic = topic, kser = kser, vser = vser }, GlobalTable)
end

-- The row of raw key bytes' table, as the value serde reads it (nil: none).
function GlobalTable:getter(ctx)
  local st = ctx:store(self.name)
  local ks, vd = self.kser.serialize, self.vser.deserialize
  local kw = string_format("global table %s: key: ", self.name)
  local vw = string_format("global table %s: value: ", self.name)
  return function(k)
    local raw = st:get(ks(k, kw))
    if raw ~= nil then return vd(raw, vw) end
    return nil
  end
end

-- stream:join(global, key_selector(k, v), joiner(v, gv, k) [, opts]); left_join: a record
-- whose selected key has no row (or is nil) gets joiner(v, nil, k). The result keeps the
-- stream's key, as Kafka Streams' does. Records without a value are dropped.
function M.join(s, g, selector, joiner, opts, kind)
  local where = builder.site()
  check_fn(selector, kind .. ": key_selector")
  check_fn(joiner, kind .. ": joiner")
  opts = check_opts(opts, kind)
  local b = s.b
  local name = b:name(kind, opts.name)
  local inner = kind == "join"
  b:processor(name, kind, {
    init = function(ctx) ctx.get = g:getter(ctx) end,
    process = function(ctx, k, v)
      if v == nil then return end
      local gk = selector(k, v)
      local gv = nil
      if gk ~= nil then gv = ctx.get(gk) end
      if gv ~= nil or not inner then
        ctx:forward(k, joiner(v, gv, k))
      end
    end,
  }, { s.node }, where)
  return stream_mod.new(b, name, s.kser, b:serde(opts.result_serde, nil, kind .. ": result_serde"),
                        s.key_changed)
end

builder.provide("global", M)

return M
