-- beck.internal.dsl.stream: the record stream of the DSL (Kafka Streams' KStream).
-- Every operation declares one node or a few with the processor API and
-- returns a new stream; the per-record closures are plain calls (no
-- varargs, no pcall) so that LuaJIT compiles them.
local builder = require "beck.internal.dsl.builder"
builder.internal()

local type, error, ipairs, setmetatable, getmetatable = type, error, ipairs, setmetatable,
                                                       getmetatable
local string_format = string.format
local fail, check_fn, check_opts = builder.fail, builder.check_fn, builder.check_opts

local M = {}
local Stream = {}
Stream.__index = Stream
M.Stream = Stream

-- new(b, node, kser, vser, key_changed): the records that node forwards.
-- key_changed: a key-changing operation came since the last partitioning,
-- so a grouping or a join must repartition first.
function M.new(b, node, kser, vser, key_changed)
  return setmetatable({ b = b, node = node, kser = kser, vser = vser,
                        key_changed = key_changed or false }, Stream)
end

function M.is_stream(x)
  return getmetatable(x) == Stream
end

local new = M.new

-- app:stream(topic | { topic, ... } [, opts]): opts.name (of the source
-- node), key_serde, value_serde (default string).
function M.source(app, topics, opts)
  local b = builder.of(app)
  opts = check_opts(opts, "stream")
  local where = builder.site()
  local kser = b:serde(opts.key_serde, nil, "stream: key_serde")
  local vser = b:serde(opts.value_serde, nil, "stream: value_serde")
  local name = b:name("source", opts.name)
  b:source(name, topics, nil, "stream", where)
  local what = "topic " .. (type(topics) == "table" and table.concat(topics, ",") or topics)
  return new(b, b:deserializer(name, kser, vser, what, where), kser, vser, false)
end

-- -- Stateless operations ------------------------------------------------------

-- derive(self, op, opts, def, changes) -> the stream of a new processor
-- child of self. changes: "key", "value" or "both": which serdes the
-- operation resets to the default (or opts.key_serde / opts.value_serde).
local function derive(self, op, opts, def, changes)
  local b = self.b
  local where = builder.site()
  local name = b:name(op, opts.name)
  b:processor(name, op, def, { self.node }, where)
  local kser, vser, kc = self.kser, self.vser, self.key_changed
  if changes == "key" or changes == "both" then
    kser = b:serde(opts.key_serde, nil, op .. ": key_serde")
    kc = true
  end
  if changes == "value" or changes == "both" then
    vser = b:serde(opts.value_serde, nil, op .. ": value_serde")
  end
  return new(b, name, kser, vser, kc)
end

-- filter(pred(k, v) [, opts]): the records for which pred is true.
function Stream:filter(pred, opts)
  check_fn(pred, "filter")
  return derive(self, "filter", check_opts(opts, "filter"), {
    process = function(ctx, k, v)
      if pred(k, v) then ctx:forward(k, v) end
    end,
  })
end

-- filter_not(pred(k, v) [, opts]): the records for which pred is false.
function Stream:filter_not(pred, opts)
  check_fn(pred, "filter_not")
  return derive(self, "filter_not", check_opts(opts, "filter_not"), {
    process = function(ctx, k, v)
      if not pred(k, v) then ctx:forward(k, v) end
    end,
  })
end

-- map(fn(k, v) -> k2, v2 [, opts]): a new key and value (the key changed).
function Stream:map(fn, opts)
  check_fn(fn, "map")
  return derive(self, "map", check_opts(opts, "map"), {
    process = function(ctx, k, v)
      local k2, v2 = fn(k, v)
      ctx:forward(k2, v2)
    end,
  }, "both")
end

-- map_values(fn(v, k) -> v2 [, opts]): a new value, same key.
function Stream:map_values(fn, opts)
  check_fn(fn, "map_values")
  return derive(self, "map_values", check_opts(opts, "map_values"), {
    process = function(ctx, k, v)
      ctx:forward(k, fn(v, k))
    end,
  }, "value")
end

-- select_key(fn(k, v) -> k2 [, opts]): a new key, same value.
function Stream:select_key(fn, opts)
  check_fn(fn, "select_key")
  return derive(self, "select_key", check_opts(opts, "select_key"), {
    process = function(ctx, k, v)
      ctx:forward(fn(k, v), v)
    end,
  }, "key")
end

local function bad_list(where, op, got)
  error(string_format("%s (%s): expected an array of %s, got %s", op, where,
                      op == "flat_map" and "{ key, value } pairs" or "values", got), 0)
end

-- flat_map(fn(k, v, emit) [, opts]): fn returns an array of { key, value }
-- pairs (or nil for none), and/or calls emit(key, value) for each record.
function Stream:flat_map(fn, opts)
  check_fn(fn, "flat_map")
  local where = builder.site()
  return derive(self, "flat_map", check_opts(opts, "flat_map"), {
    init = function(ctx)
      ctx.emit = function(k2, v2) ctx:forward(k2, v2) end
    end,
    process = function(ctx, k, v)
      local list = fn(k, v, ctx.emit)
      if list == nil then return end
      if type(list) ~= "table" then bad_list(where, "flat_map", type(list)) end
      for i = 1, #list do
        local p = list[i]
        if type(p) ~= "table" then bad_list(where, "flat_map", "an array of " .. type(p)) end
        ctx:forward(p[1], p[2])
      end
    end,
  }, "both")
end

-- flat_map_values(fn(v, k, emit) [, opts]): fn returns an array of values
-- (or nil), and/or calls emit(value); each keeps the key.
function Stream:flat_map_values(fn, opts)
  check_fn(fn, "flat_map_values")
  local where = builder.site()
  return derive(self, "flat_map_values", check_opts(opts, "flat_map_values"), {
    init = function(ctx)
      ctx.emit = function(v2) ctx:forward(ctx.key, v2) end
    end,
    process = function(ctx, k, v)
      ctx.key = k
      local list = fn(v, k, ctx.emit)
      if list == nil then return end
      if type(list) ~= "table" then bad_list(where, "flat_map_values", type(list)) end
      for i = 1, #list do ctx:forward(k, list[i]) end
    end,
  }, "value")
end

-- peek(fn(k, v) [, opts]): calls fn, passes the record on.
function Stream:peek(fn, opts)
  check_fn(fn, "peek")
  return derive(self, "peek", check_opts(opts, "peek"), {
    process = function(ctx, k, v)
      fn(k, v)
      ctx:forward(k, v)
    end,
  })
end

-- foreach(fn(k, v) [, opts]): calls fn; the end of the stream.
function Stream:foreach(fn, opts)
  check_fn(fn, "foreach")
  derive(self, "foreach", check_opts(opts, "foreach"), {
    process = function(_, k, v) fn(k, v) end,
  })
end

-- process(def [, opts]): a processor of the processor API (docs/topology.md)
-- in the middle of a stream; opts.stores lists stores to declare and
-- connect to it: names, or { name =, changelog = false }. What it forwards
-- is a stream whose key may have changed.
function Stream:process(def, opts)
  opts = check_opts(opts, "process")
  local b = self.b
  local where = builder.site()
  local name = b:name("process", opts.name)
  b:processor(name, "process", def, { self.node }, where)
  for _, s in ipairs(opts.stores or {}) do
    if type(s) == "table" then
      b:store(s.name, { changelog = s.changelog }, name, "process", where)
    else
      b:store(s, nil, name, "process", where)
    end
  end
  return new(b, name, b:serde(opts.key_serde, nil, "process: key_serde"),
             b:serde(opts.value_serde, nil, "process: value_serde"), true)
end

-- -- Branches and merges -----------------------------------------------------------

local Split = {}
Split.__index = Split

-- split([opts]): a record goes to the first branch whose predicate holds.
--   local b = s:split():branch("big", is_big):branch("small", is_small)
--              :default_branch("rest")          -- or :no_default_branch()
--   b.big:to("big-orders")
function Stream:split(opts)
  opts = check_opts(opts, "split")
  local b = self.b
  local where = builder.site()
  local name = b:name("split", opts.name)
  local preds, children = {}, {}
  local sp = setmetatable({ stream = self, name = name, preds = preds, children = children,
                            streams = {}, n = 0 }, Split)
  b:processor(name, "split", {
    process = function(ctx, k, v)
      for i = 1, #preds do
        if preds[i](k, v) then
          ctx:forward(k, v, children[i])
          return
        end
      end
      local d = sp.default
      if d then ctx:forward(k, v, d) end
    end,
  }, { self.node }, where)
  return sp
end

local function add_branch(sp, bname, op)
  local b = sp.stream.b
  sp.n = sp.n + 1
  bname = bname or tostring(sp.n)
  if type(bname) ~= "string" and type(bname) ~= "number" then
    fail("%s: the branch name must be a string", op)
  end
  if sp.streams[bname] then fail("%s: split '%s' has a branch '%s' already", op, sp.name, bname) end
  if sp.closed then fail("%s: split '%s' is closed (after default_branch)", op, sp.name) end
  local node = b:derived(sp.name .. "-" .. bname)
  b:processor(node, "branch", builder.PASS, { sp.name }, builder.site())
  local s = sp.stream
  sp.streams[bname] = new(b, node, s.kser, s.vser, s.key_changed)
  return node
end

-- branch([name,] pred(k, v)): name defaults to the branch's number.
function Split:branch(bname, pred)
  if pred == nil and type(bname) == "function" then bname, pred = nil, bname end
  check_fn(pred, "branch")
  local node = add_branch(self, bname, "branch")
  self.preds[#self.preds + 1] = pred
  self.children[#self.children + 1] = node
  return self
end

-- default_branch([name]): the records no predicate took ("default");
-- returns { [name] = stream } of every branch.
function Split:default_branch(bname)
  self.default = add_branch(self, bname or "default", "default_branch")
  self.closed = true
  return self.streams
end

function Split:no_default_branch()
  self.closed = true
  return self.streams
end

-- branch(pred, ...) -> streams in the order of the predicates; a record
-- goes to the first that holds (Kafka Streams' older KStream#branch).
function Stream:branch(...)
  local sp = self:split()
  local n = select("#", ...)
  for i = 1, n do sp:branch((select(i, ...))) end
  local streams = sp:no_default_branch()
  local list = {}
  for i = 1, n do list[i] = streams[tostring(i)] end
  return list
end

-- merge(other, ... [, opts]): the records of all of them.
function Stream:merge(...)
  local parents, kc = { self.node }, self.key_changed
  local opts = {}
  for i = 1, select("#", ...) do
    local s = select(i, ...)
    if M.is_stream(s) then
      parents[#parents + 1] = s.node
      kc = kc or s.key_changed
    elseif i == select("#", ...) and type(s) == "table" and getmetatable(s) == nil then
      opts = s
    else
      fail("merge: expected streams, got %s", type(s))
    end
  end
  local b = self.b
  local where = builder.site()
  local name = b:name("merge", opts.name)
  b:processor(name, "merge", builder.PASS, parents, where)
  return new(b, name, self.kser, self.vser, kc)
end

-- -- Out ---------------------------------------------------------------------------

-- to(topic [, opts]) or to(fn(k, v) -> topic, { topics = {...} } [+ opts]):
-- writes the stream, serialized with opts.key_serde / value_serde (default:
-- the stream's). A topic chosen per record must be one of opts.topics (the
-- runtime creates and routes to the topics it knows at start).
function Stream:to(topic, opts)
  opts = check_opts(opts, "to")
  local b = self.b
  local where = builder.site()
  local kser = b:serde(opts.key_serde, self.kser, "to: key_serde")
  local vser = b:serde(opts.value_serde, self.vser, "to: value_serde")
  local ks, vs = kser.serialize, vser.serialize
  local name = b:name("to", opts.name)
  if type(topic) == "string" then
    local kw = string_format("to %s (%s): key: ", topic, where)
    local vw = string_format("to %s (%s): value: ", topic, where)
    b:processor(name, "to", {
      process = function(ctx, k, v)
        ctx:forward(ks(k, kw), vs(v, vw))
      end,
    }, { self.node }, where)
    b:sink(b:derived(name .. "-sink"), topic, name, "to", where)
    return
  end
  if type(topic) ~= "function" then
    fail("to: expected a topic name or a function(key, value) returning one, got %s", type(topic))
  end
  if type(opts.topics) ~= "table" or #opts.topics == 0 then
    fail("to: a function needs { topics = { ... } }, every topic it may return")
  end
  local sinks, known = {}, table.concat(opts.topics, ", ")
  local kw = string_format("to (%s): key: ", where)
  local vw = string_format("to (%s): value: ", where)
  b:processor(name, "to", {
    process = function(ctx, k, v)
      local t = topic(k, v)
      local sink = sinks[t]
      if sink == nil then
        error(string_format("to (%s): the function returned topic %s, not one of %s", where,
                            tostring(t), known), 0)
      end
      ctx:forward(ks(k, kw), vs(v, vw), sink)
    end,
  }, { self.node }, where)
  for _, t in ipairs(opts.topics) do
    sinks[t] = b:sink(b:derived(name .. "-" .. t), t, name, "to", where)
  end
end

-- repartition([opts]): through the topic <app id>-<name>-repartition,
-- partitioned by the current key. opts: name, partitions, key_serde,
-- value_serde (default: the stream's).
function Stream:repartition(opts)
  opts = check_opts(opts, "repartition")
  local b = self.b
  local where = builder.site()
  local kser = b:serde(opts.key_serde, self.kser, "repartition: key_serde")
  local vser = b:serde(opts.value_serde, self.vser, "repartition: value_serde")
  if opts.partitions ~= nil and (type(opts.partitions) ~= "number" or opts.partitions < 1) then
    fail("repartition: partitions must be a number >= 1")
  end
  local name = b:name("repartition", opts.name)
  local node = b:repartition(self.node, name, kser, vser, where, { partitions = opts.partitions })
  return new(b, node, kser, vser, false)
end

-- -- Grouping, tables and joins (beck.dsl.aggregate, .table, .join) ---------------

-- group_by_key([opts]): opts.name names the repartition topic when the key
-- changed; key_serde / value_serde for it and the stores (default: the
-- stream's).
function Stream:group_by_key(opts)
  opts = check_opts(opts, "group_by_key")
  local b = self.b
  return builder.module("aggregate").grouped(self, self.node,
    b:serde(opts.key_serde, self.kser, "group_by_key: key_serde"),
    b:serde(opts.value_serde, self.vser, "group_by_key: value_serde"),
    self.key_changed, opts.name, builder.site())
end

-- group_by(fn(k, v) -> new key [, opts]): always through a repartition topic.
function Stream:group_by(fn, opts)
  check_fn(fn, "group_by")
  opts = check_opts(opts, "group_by")
  local b = self.b
  local where = builder.site()
  local name = b:name("group_by", nil)
  b:processor(name, "group_by", {
    process = function(ctx, k, v)
      ctx:forward(fn(k, v), v)
    end,
  }, { self.node }, where)
  return builder.module("aggregate").grouped(self, name,
    b:serde(opts.key_serde, nil, "group_by: key_serde"),
    b:serde(opts.value_serde, self.vser, "group_by: value_serde"),
    true, opts.name, where)
end

-- to_table([opts]): the latest value per key, in a store (opts.store).
function Stream:to_table(opts)
  opts = check_opts(opts, "to_table")
  return builder.module("table").from_stream(self, opts, builder.site())
end

-- join(table, joiner(v, tv, k) [, opts]) or join(stream, joiner(v, ov, k),
-- window [, opts]); left_join likewise; outer_join(stream, ...).
function Stream:join(other, joiner, a, b)
  return builder.module("join").stream_join(self, other, joiner, a, b, "join")
end

function Stream:left_join(other, joiner, a, b)
  return builder.module("join").stream_join(self, other, joiner, a, b, "left_join")
end

function Stream:outer_join(other, joiner, a, b)
  return builder.module("join").stream_join(self, other, joiner, a, b, "outer_join")
end

builder.provide("stream", M)

return M
