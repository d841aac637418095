-- beck.internal.dsl.builder: what the DSL keeps per app while it compiles streams and
-- tables into app:source / app:processor / app:sink / app:store calls: stable
-- names, the user's file:line for every node, stores declared once all their
-- processors are known, repartition topics, and counters (late records).
local serde = require "beck.serde"

local type, error, tostring, ipairs, setmetatable, getmetatable = type, error, tostring, ipairs,
                                                                 setmetatable, getmetatable
local string_format = string.format
local unpack = unpack or table.unpack

local M = {}

-- The DSL's modules by name ("stream", "table", "aggregate", "window", "join"). Each one
-- registers itself here as it loads (M.provide), and the others reach it through
-- M.module(name) when a topology calls them: never by a require at call time. beck.dsl
-- loads them all, in a fixed order, before any topology runs. So a module requires only
-- what sits below it (builder, serde, and for join the classes it joins), and no require
-- cycle can form; spec/01-unit/27-dsl_modules_spec.lua checks both.
local modules = {}

function M.provide(name, mod)
  modules[name] = mod
end

function M.module(name)
  return modules[name] or
         error("beck.dsl: the DSL module " .. name .. " is not loaded (require \"beck.dsl\")", 2)
end

-- -- Where the user is ---------------------------------------------------------

-- Sources of the DSL's own modules: frames to skip when looking for the
-- user's line.
local internal_sources = {}

function M.internal()
  internal_sources[debug.getinfo(2, "S").source] = true
end
internal_sources[debug.getinfo(1, "S").source] = true

-- "file:line" of the first caller outside the DSL.
function M.site()
  for level = 2, 60 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" and not internal_sources[info.source] then
      return (info.short_src or "?") .. ":" .. (info.currentline or 0)
    end
  end
  return "?"
end

-- Raises msg at the user's line (a wrong argument to the DSL).
function M.fail(fmt, ...)
  error(M.site() .. ": " .. string_format(fmt, ...), 0)
end

function M.check_fn(f, what)
  if type(f) ~= "function" then
    M.fail("%s: expected a function, got %s", what, type(f))
  end
end

function M.check_opts(opts, what)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    M.fail("%s: expected an options table, got %s", what, type(opts))
  end
  return opts
end

-- -- The per-app state ---------------------------------------------------------

local Builder = {}
Builder.__index = Builder

local states = setmetatable({}, { __mode = "k" })

-- of(app) -> the app's DSL state, made on first use. It hooks the app's
-- describe() (the point where the runtime, the test driver and `beck
-- describe` read the topology) to declare the DSL's stores first: a store is
-- declared with every processor that reads it, and joins add readers to
-- stores made earlier.
function M.of(app)
  local b = states[app]
  if b then return b end
  b = setmetatable({ app = app, counters = {}, stores = {}, store_by_name = {}, info = {},
                     stats = { dropped_late = 0, by_processor = {} } }, Builder)
  states[app] = b
  local describe = getmetatable(app).describe
  app.describe = function(self)
    b:finalize()
    return describe(self)
  end
  return b
end

function M.get(app)
  return states[app]
end

function Builder:check_open()
  if self.finalized then
    M.fail("the topology of app '%s' was already described (run, tested or printed): add " ..
           "streams and tables before that", self.app.config.id)
  end
end

-- A name for a node of operation `op`: the user's, or "<op>-<n>" counting
-- the operations of that kind in declaration order (so adding a filter does
-- not rename the stores of the counts after it).
function Builder:name(op, user)
  self:check_open()
  if user ~= nil then
    if type(user) ~= "string" or user == "" then
      M.fail("%s: name must be a non-empty string", op)
    end
    if self.app.nodes[user] then
      M.fail("%s: a node named '%s' is already declared at %s", op, user,
             self.app.nodes[user].where)
    end
    return user
  end
  local n = self.counters[op] or 0
  local name
  repeat
    n = n + 1
    name = op .. "-" .. n
  until not self.app.nodes[name] and not self.store_by_name[name] and not self.app.stores[name]
  self.counters[op] = n
  return name
end

-- A name made from another node's: `base`, or base-2, base-3, ... when a
-- node or store already has it.
function Builder:derived(base)
  local name, n = base, 1
  while self.app.nodes[name] or self.store_by_name[name] or self.app.stores[name] do
    n = n + 1
    name = base .. "-" .. n
  end
  return name
end

local function note(self, name, op, where)
  local node = self.app.nodes[name]
  node.where = where -- errors about the node name the user's line, not the DSL's
  self.info[name] = { op = op, where = where }
end

-- -- Nodes -----------------------------------------------------------------------

-- Calls a builder method of the app; its errors (a bad topic name, ...)
-- are raised again at the user's line, without the DSL's.
local function call(where, f, ...)
  local ok, err = pcall(f, ...)
  if not ok then
    error(where .. ": " .. tostring(err):gsub("^[^:\n]*:%d+: ", ""), 0)
  end
end

function Builder:source(name, topics, opts, op, where)
  call(where, self.app.source, self.app, name, topics, opts)
  note(self, name, op, where)
  return name
end

-- processor(name, op, def, parents, where): parents is a list of node names.
function Builder:processor(name, op, def, parents, where)
  call(where, self.app.processor, self.app, name, def, unpack(parents))
  note(self, name, op, where)
  return name
end

function Builder:sink(name, topic, parent, op, where)
  call(where, self.app.sink, self.app, name, topic, parent)
  note(self, name, op, where)
  return name
end

-- A node that does nothing but pass records on (branches of split).
local PASS = { process = function(ctx, k, v) ctx:forward(k, v) end }
M.PASS = PASS

-- -- Stores ----------------------------------------------------------------------

-- store(name, opts, processor, op, where): a store that app:store declares
-- at describe time, with every processor that use_store adds by then.
function Builder:store(name, opts, proc, op, where)
  self:check_open()
  if type(name) ~= "string" or not name:match("^[%w._-]+$") then
    M.fail("%s: store name must be letters, digits, '.', '_' or '-', got %s", op, tostring(name))
  end
  local prev = self.store_by_name[name] or self.app.stores[name]
  if prev then
    M.fail("%s: store '%s' is already declared at %s", op, name, prev.where)
  end
  -- a key-value store's time to live (app:store's ttl, ttl_clock), checked here so that the
  -- error names the line of the operation
  local ttl, clock = opts and opts.ttl, opts and opts.ttl_clock
  if ttl ~= nil and (type(ttl) ~= "number" or ttl <= 0 or ttl ~= math.floor(ttl)) then
    M.fail("%s: store %s: ttl must be a positive number of ms, got %s", op, name, tostring(ttl))
  end
  if clock ~= nil and ((clock ~= "record" and clock ~= "wall") or ttl == nil) then
    M.fail("%s: store %s: ttl_clock must be \"record\" or \"wall\", with a ttl", op, name)
  end
  local st = { name = name, opts = { changelog = opts and opts.changelog, kind = opts and opts.kind,
                                     retention = opts and opts.retention,
                                     history_retention = opts and opts.history_retention,
                                     key_serde = opts and opts.key_serde,
                                     value_serde = opts and opts.value_serde,
                                     ttl = ttl, ttl_clock = clock,
                                     timestamped = opts and opts.timestamped },
               procs = { proc },
               where = where, op = op }
  self.stores[#self.stores + 1] = st
  self.store_by_name[name] = st
  return name
end

function Builder:use_store(name, proc)
  local st = self.store_by_name[name]
  for _, p in ipairs(st.procs) do
    if p == proc then return end
  end
  st.procs[#st.procs + 1] = proc
end

function Builder:finalize()
  if self.finalized then return end
  self.finalized = true
  for _, st in ipairs(self.stores) do
    self.app:store(st.name, st.opts, unpack(st.procs))
    self.app.stores[st.name].where = st.where
  end
end

-- -- Serdes ------------------------------------------------------------------------

-- serde(spec, default, what): resolves a serde option, raising at the
-- user's line for a bad one.
function Builder.serde(_, spec, default, what)
  local ok, s = pcall(serde.of, spec, default)
  if not ok then M.fail("%s: %s", what, tostring(s):gsub("^[^:]*:%d+: ", "")) end
  return s
end

-- -- Repartitioning ------------------------------------------------------------------

-- repartition(parent, name, kser, vser, where, opts) -> the node reading the
-- topic <app id>-<name>-repartition back. Records are serialized with the
-- given serdes on the way in and read back with them; drop_nil_keys
-- (groupings, joins) drops records without a key, which have no partition.
-- The topic starts a new subtopology; the runtime creates it with the
-- partitions of the app's widest input (or opts.partitions).
function Builder:repartition(parent, name, kser, vser, where, opts)
  opts = opts or {}
  local app = self.app
  local topic = app.config.id .. "-" .. name .. "-repartition"
  local kw = string_format("repartition topic %s (%s): key: ", topic, where)
  local vw = string_format("repartition topic %s (%s): value: ", topic, where)
  local ks, vs = kser.serialize, vser.serialize
  local drop_nil = opts.drop_nil_keys
  local prep = self:derived(name .. "-repartition-in")
  self:processor(prep, "repartition", {
    process = function(ctx, k, v)
      if k == nil and drop_nil then return end
      ctx:forward(ks(k, kw), vs(v, vw))
    end,
  }, { parent }, where)
  local sink = self:derived(name .. "-repartition-sink")
  self:sink(sink, topic, prep, "repartition", where)
  local src = self:derived(name .. "-repartition-source")
  self:source(src, topic, { internal = true, partitions = opts.partitions }, "repartition", where)
  return self:deserializer(src, kser, vser, string_format("repartition topic %s", topic), where)
end

-- deserializer(node, kser, vser, what, where) -> node, or a processor after
-- it that turns the strings read from a topic into values (none when both
-- serdes are string).
function Builder:deserializer(node, kser, vser, what, where)
  if kser.identity and vser.identity then return node end
  local kd, vd = kser.deserialize, vser.deserialize
  local kw = what .. ": key: "
  local vw = what .. ": value: "
  local name = self:derived(node .. "-deserialize")
  return self:processor(name, "deserialize", {
    process = function(ctx, k, v)
      ctx:forward(kd(k, kw), vd(v, vw))
    end,
  }, { node }, where)
end

-- -- Counters --------------------------------------------------------------------

-- dropped(proc, n): records (or window updates) a processor dropped as late.
function Builder:dropped(proc, n)
  local s = self.stats
  s.dropped_late = s.dropped_late + n
  s.by_processor[proc] = (s.by_processor[proc] or 0) + n
  return s.by_processor[proc]
end

return M
