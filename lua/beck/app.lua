-- beck.app: the topology builder (sources, processors, sinks) that the DSL of
-- beck.dsl builds on. It only describes; beck.internal.runtime runs it.
local M = {}
local App = {}
local KEY_GROUPS = 4096 -- runtime/base/hash.h
M.FOREVER = 2 ^ 52 -- a timestamped store's time to live, in ms: never
App.__index = App

local function where(level)
  local info = debug.getinfo(level + 1, "Sl")
  if not info then return "?" end
  return (info.short_src or "?") .. ":" .. (info.currentline or 0)
end

local function check_name(self, name, what)
  if type(name) ~= "string" or name == "" then
    error(what .. ": the name must be a non-empty string", 3)
  end
  if self.nodes[name] then
    error(string.format("%s: a node named '%s' is already declared at %s", what, name,
                        self.nodes[name].where), 3)
  end
end

local function add_parents(self, node, parents, what)
  if #parents == 0 then
    error(string.format("%s '%s': needs at least one parent", what, node.name), 3)
  end
  for _, pname in ipairs(parents) do
    local parent = self.nodes[pname]
    if type(pname) ~= "string" or not parent then
      error(string.format("%s '%s': unknown parent '%s' (declare parents first)", what,
                          node.name, tostring(pname)), 3)
    end
    if parent.kind == "sink" then
      error(string.format("%s '%s': parent '%s' is a sink", what, node.name, pname), 3)
    end
    parent.children[#parent.children + 1] = node.name
    node.parents[#node.parents + 1] = pname
  end
end

local function add_node(self, node)
  self.nodes[node.name] = node
  self.order[#self.order + 1] = node
  return self
end

function M.new(config, level)
  if type(config.id) ~= "string" or not config.id:match("^[%w._-]+$") then
    error("beck.app: 'id' must be a string of letters, digits, '.', '_' or '-'", level)
  end
  local self = setmetatable({ config = config, nodes = {}, order = {}, hooks = {}, stores = {},
                              store_order = {}, where = where(level) }, App)
  return self
end

function M.is_app(x)
  return getmetatable(x) == App
end

-- app:source(name, topic | {topic, ...} [, opts]): opts.internal = true
-- marks topics the app owns (repartition topics): the runtime creates them
-- on any cluster, with opts.partitions or as many partitions as the app's
-- widest external input.
function App:source(name, topics, opts)
  check_name(self, name, "source")
  if type(topics) == "string" then topics = { topics } end
  if type(topics) ~= "table" or #topics == 0 then
    error(string.format("source '%s': expected a topic name or a list of them", name), 2)
  end
  for _, t in ipairs(topics) do
    if type(t) ~= "string" or not t:match("^[%w._-]+$") then
      error(string.format("source '%s': bad topic name '%s'", name, tostring(t)), 2)
    end
  end
  opts = opts or {}
  if type(opts) ~= "table" then
    error(string.format("source '%s': expected an options table", name), 2)
  end
  return add_node(self, { kind = "source", name = name, topics = topics, children = {},
                          internal = opts.internal == true, partitions = opts.partitions,
                          parents = {}, where = where(2) })
end

-- app:processor(name, def, parent, ...): def is a table with process(ctx, k, v)
-- and optional init(ctx) / close(ctx), or a function returning such a table
-- (called once per task).
function App:processor(name, def, ...)
  check_name(self, name, "processor")
  local t = type(def)
  if t == "table" then
    if type(def.process) ~= "function" then
      error(string.format("processor '%s': the table has no process(ctx, key, value) function",
                          name), 2)
    end
    for _, f in ipairs { "init", "close" } do
      if def[f] ~= nil and type(def[f]) ~= "function" then
        error(string.format("processor '%s': '%s' must be a function", name, f), 2)
      end
    end
  elseif t ~= "function" then
    error(string.format("processor '%s': expected a table with process() or a function " ..
                        "returning one, got %s", name, t), 2)
  end
  local node = { kind = "processor", name = name, def = def, children = {}, parents = {},
                 where = where(2) }
  add_parents(self, node, { ... }, "processor")
  return add_node(self, node)
end

-- app:sink(name, topic, parent, ...)
function App:sink(name, topic, ...)
  check_name(self, name, "sink")
  if type(topic) ~= "string" or not topic:match("^[%w._-]+$") then
    error(string.format("sink '%s': expected a topic name, got %s", name, tostring(topic)), 2)
  end
  local node = { kind = "sink", name = name, topic = topic, children = {}, parents = {},
                 where = where(2) }
  add_parents(self, node, { ... }, "sink")
  return add_node(self, node)
end

-- app:store(name [, opts], processor, ...): a key-value store in RocksDB,
-- connected to the processors that use it (ctx:store(name)). opts:
-- changelog = false opts out of the changelog topic <id>-<name>-changelog;
-- kind = "window" for keys laid out as beck.dsl's window stores lay them
-- (runtime/engine/store.h: the key group is the embedded record key's); retention =
-- ms that a window store keeps its windows: its changelog is then created
-- compact,delete with that retention plus a day (docs/kafka.md); key_serde and
-- value_serde name the serdes of its keys and values, for readers (GET /v1/stores; the
-- DSL's aggregations name theirs); ttl = ms a key-value store keeps a value after it was
-- written, counted in record time (the record's timestamp against the task's stream time)
-- or, with ttl_clock = "wall", on the wall clock: reads never return an expired value, and
-- expired entries are deleted in the background, tombstoned in the changelog
-- (docs/state.md, TTL).
function App:store(name, opts, ...)
  local procs = { ... }
  if type(opts) == "string" then
    table.insert(procs, 1, opts)
    opts = {}
  end
  opts = opts or {}
  if type(name) ~= "string" or not name:match("^[%w._-]+$") then
    error("store: the name must be letters, digits, '.', '_' or '-'", 2)
  end
  if type(opts) ~= "table" then
    error(string.format("store '%s': expected an options table", name), 2)
  end
  if self.stores[name] then
    error(string.format("store '%s' is already declared at %s", name, self.stores[name].where), 2)
  end
  if #procs == 0 then
    error(string.format("store '%s': connect it to at least one processor", name), 2)
  end
  if opts.kind ~= nil and opts.kind ~= "kv" and opts.kind ~= "window" and
     opts.kind ~= "versioned" then
    error(string.format("store '%s': kind must be \"kv\", \"window\" or \"versioned\"", name),
          2)
  end
  if opts.kind == "versioned" and (type(opts.history_retention) ~= "number" or
                                   opts.history_retention < 0 or
                                   opts.history_retention ~= math.floor(opts.history_retention)) then
    error(string.format("store '%s': a versioned store needs history_retention (ms, >= 0)",
                        name), 2)
  end
  if opts.retention ~= nil and (type(opts.retention) ~= "number" or opts.retention <= 0 or
                                opts.retention ~= math.floor(opts.retention)) then
    error(string.format("store '%s': retention must be a positive number of ms", name), 2)
  end
  if opts.retention ~= nil and opts.kind ~= "window" then
    error(string.format("store '%s': retention is for window stores (kind = \"window\")", name), 2)
  end
  if opts.ttl ~= nil and (type(opts.ttl) ~= "number" or opts.ttl <= 0 or
                         opts.ttl ~= math.floor(opts.ttl)) then
    error(string.format("store '%s': ttl must be a positive number of ms", name), 2)
  end
  if opts.ttl ~= nil and (opts.kind == "window" or opts.kind == "versioned") then
    error(string.format("store '%s': ttl is for key-value stores (a window store has its " ..
                        "retention)", name), 2)
  end
  if opts.ttl_clock ~= nil and opts.ttl_clock ~= "record" and opts.ttl_clock ~= "wall" then
    error(string.format("store '%s': ttl_clock must be \"record\" or \"wall\"", name), 2)
  end
  if opts.ttl_clock ~= nil and opts.ttl == nil then
    error(string.format("store '%s': ttl_clock without a ttl", name), 2)
  end
  for _, f in ipairs { "key_serde", "value_serde" } do
    if opts[f] ~= nil and type(opts[f]) ~= "string" then
      error(string.format("store '%s': %s names the serde (a string)", name, f), 2)
    end
  end
  -- a versioned store (beck.internal.versioned) is laid out as a window store
  -- a timestamped key-value store keeps each value's time (its last write's) beside it, in
  -- the layout of a store with a time to live that never runs out (store.lua, get_time)
  if opts.timestamped and opts.kind ~= nil and opts.kind ~= "kv" then
    error(string.format("store '%s': timestamped is for key-value stores", name), 2)
  end
  local ttl = opts.ttl
  if opts.timestamped and ttl == nil then ttl = M.FOREVER end
  local st = { name = name, logged = opts.changelog ~= false,
               window = opts.kind == "window" or opts.kind == "versioned",
               versioned = opts.kind == "versioned", history_retention = opts.history_retention,
               retention = opts.retention, ttl = ttl, ttl_wall = opts.ttl_clock == "wall",
               timestamped = opts.timestamped and opts.ttl == nil,
               key_serde = opts.key_serde,
               value_serde = opts.value_serde, processors = procs, where = where(2) }
  for _, pname in ipairs(procs) do
    local node = self.nodes[pname]
    if not node or node.kind ~= "processor" then
      error(string.format("store '%s': unknown processor '%s' (declare processors first)", name,
                          tostring(pname)), 2)
    end
    node.stores = node.stores or {}
    node.stores[#node.stores + 1] = name
  end
  self.stores[name] = st
  self.store_order[#self.store_order + 1] = st
  return self
end

-- app:global_store(name, topic [, opts]): a global table (Kafka Streams' global store): every
-- node holds all of it, read from every partition of `topic` (no changelog: the topic is its
-- log, and should be compacted), caught up to the topic's end before any task runs and kept
-- current by a thread of its own. Any processor reads it with ctx:store(name):get(key)
-- (read-only); the query API serves it on every node. opts: key_serde, value_serde (names,
-- for describe and queries). The DSL's app:global_table(topic, opts) declares one too.
function App:global_store(name, topic, opts)
  opts = opts or {}
  if type(name) ~= "string" or not name:match("^[%w._-]+$") then
    error("global_store: the name must be letters, digits, '.', '_' or '-'", 2)
  end
  if type(topic) ~= "string" or topic == "" then
    error(string.format("global_store '%s': the topic must be a non-empty string", name), 2)
  end
  if type(opts) ~= "table" then
    error(string.format("global_store '%s': expected an options table", name), 2)
  end
  if self.stores[name] or (self.globals and self.globals[name]) then
    local at = (self.stores[name] or self.globals[name]).where
    error(string.format("global_store '%s': a store of that name is already declared at %s",
                        name, at), 2)
  end
  self.globals = self.globals or {}
  self.global_order = self.global_order or {}
  for _, g in ipairs(self.global_order) do
    if g.topic == topic then
      error(string.format("global_store '%s': topic '%s' is read by global store '%s' already",
                          name, topic, g.name), 2)
    end
  end
  local g = { name = name, topic = topic, key_serde = opts.key_serde,
              value_serde = opts.value_serde, where = where(2) }
  self.globals[name] = g
  self.global_order[#self.global_order + 1] = g
  return self
end

-- app:connect(store, processor, ...): connects more processors to a store
-- declared earlier.
function App:connect(name, ...)
  local st = self.stores[name]
  if not st then
    error(string.format("connect: store '%s' is not declared (app:store)", tostring(name)), 2)
  end
  for _, pname in ipairs({ ... }) do
    local node = self.nodes[pname]
    if not node or node.kind ~= "processor" then
      error(string.format("connect: unknown processor '%s'", tostring(pname)), 2)
    end
    st.processors[#st.processors + 1] = pname
    node.stores = node.stores or {}
    node.stores[#node.stores + 1] = name
  end
  self._plan, self._logical = nil, nil
  return self
end

-- app:hook(name, fn): operational hooks (on_assign, on_revoke, ...).
function App:hook(name, fn)
  if type(name) ~= "string" or type(fn) ~= "function" then
    error("hook: expected a name and a function", 2)
  end
  self.hooks[name] = fn
  return self
end

-- Loads a hooks file (--hooks): a Lua file returning { name = function }.
-- Its hooks are added to the app's, and win over them.
function M.load_hooks(app, path)
  local chunk, err = loadfile(path)
  if not chunk then error(err, 0) end
  local hooks = chunk()
  if type(hooks) ~= "table" then
    error(path .. ": a hooks file must return a table of functions", 0)
  end
  for name, fn in pairs(hooks) do
    if type(name) ~= "string" or type(fn) ~= "function" then
      error(string.format("%s: hook %s is not a function", path, tostring(name)), 0)
    end
    app.hooks[name] = fn
  end
end

-- The `tasks` setting, "S=N[,S=N...]": { [S + 1] = N }, checked against the app's
-- subtopologies (beck.testing's driver reads it too).
local function parse_tasks(spec, nsubs)
  local out = {}
  if spec == nil or spec == "" then return out end
  if type(spec) ~= "string" then
    error(string.format("setting 'tasks': expected a string \"S=N[,S=N...]\", got %s",
                        type(spec)), 0)
  end
  for item in (spec .. ","):gmatch("([^,]*),") do
    local s, n = item:match("^%s*(%d+)%s*=%s*(%d+)%s*$")
    s, n = tonumber(s), tonumber(n)
    if not s then
      error(string.format("setting 'tasks': '%s' is not S=N (a subtopology and a task count)",
                          item), 0)
    end
    if s >= nsubs then
      error(string.format("setting 'tasks': the app has subtopologies 0 to %d, not %d",
                          nsubs - 1, s), 0)
    end
    if n < 1 or n > KEY_GROUPS then
      error(string.format("setting 'tasks': subtopology %d: the task count must be 1 to %d, " ..
                          "got %d", s, KEY_GROUPS, n), 0)
    end
    if out[s + 1] then
      error(string.format("setting 'tasks': subtopology %d is given twice", s), 0)
    end
    out[s + 1] = n
  end
  return out
end

M.parse_tasks = parse_tasks

-- Generation g's topic for the k-th of a subtopology's ntopics source topics, claimed for
-- the app (an error if the topology uses it): n partitions by key group, read by
-- subtopology sub_index (1-based) through the source node source_node. Returns its name
-- and index.
local function claim_gen_topic(topic, id, s, g, k, ntopics, n, sub_index, source_node)
  local name = string.format("%s-%d-repartition-g%d%s", id, s - 1, g,
                             ntopics > 1 and "-" .. (k - 1) or "")
  local t, ti = topic(name)
  if t.source or t.sink then
    error(string.format("topic %s is the app's own (subtopology %d's generation %d): " ..
                        "the topology may not use it", name, s - 1, g), 0)
  end
  t.source, t.internal, t.partitions, t.keygroups = true, true, n, true
  t.sub, t.source_node, t.generation = sub_index, source_node, g
  return name, ti
end

-- A subtopology given a task count of its own (the `tasks` setting) becomes generation 1
-- of it (docs/repartitioning.md): its source topics are read by a passthrough subtopology
-- (appended, with no nodes: C forwards each record as it is) that writes every record to
-- the generation's topic <id>-<S>-repartition-g1 (one per source topic, -<k> after it when
-- there are several), partitioned by key group; its tasks read those and own key groups by
-- range; its stores' changelogs are <id>-<store>-changelog-g1.
local function add_generations(plan, id, tasks, topic)
  local nsubs = #plan.subtopologies
  for s = 1, nsubs do
    local n = tasks[s]
    local sub = plan.subtopologies[s]
    if n then
      local pass = { index = #plan.subtopologies + 1, topics = {}, sources = {},
                     passthrough = true, of = s, tasks = n }
      plan.subtopologies[pass.index] = pass
      local gen_topics, inputs = {}, {}
      sub.gen_topic = {}
      for k, ti in ipairs(sub.topics) do
        local t = plan.topics[ti]
        local name, gi = claim_gen_topic(topic, id, s, 1, k, #sub.topics, n, s, t.source_node)
        t.sub, t.pass_to = pass.index, gi
        pass.topics[k] = ti
        gen_topics[k], inputs[k] = gi, t.name
        plan.gen_topic[t.name] = name
        sub.gen_topic[t.name] = name
      end
      sub.topics, sub.tasks, sub.generation, sub.of, sub.inputs = gen_topics, n, 1, s, inputs
    end
    for _, st in ipairs(plan.stores) do
      if st.sub == s and st.logged then
        local g0 = id .. "-" .. st.name .. "-changelog"
        st.changelog = n and g0 .. "-g1" or g0
        st.changelog_other = n and g0 or g0 .. "-g1"
      end
    end
  end
end

-- The `generations` list, "S=N[,S=N...]" in the order the moves were made: each entry is
-- the next generation of subtopology S, with N tasks ({ { s = S + 1, n = N }, ... }).
local function parse_generations(spec, nsubs)
  local out = {}
  if spec == nil or spec == "" then return out end
  for item in (spec .. ","):gmatch("([^,]*),") do
    local s, n = item:match("^%s*(%d+)%s*=%s*(%d+)%s*$")
    s, n = tonumber(s), tonumber(n)
    if not s or s >= nsubs or n < 1 or n > KEY_GROUPS then
      error(string.format("generations: '%s' is not S=N (a subtopology of 0 to %d and a " ..
                          "task count of 1 to %d)", item, nsubs - 1, KEY_GROUPS), 0)
    end
    out[#out + 1] = { s = s + 1, n = n }
  end
  return out
end

-- Generations after the first (docs/repartitioning.md, Moving a generation): each is a
-- subtopology of its own appended to the plan, so that the tasks, topics and stores of
-- the ones before keep their indices while it is added to a running app. It runs the
-- processors of the subtopology it is a generation of (`of`), reads its own topics
-- <id>-<S>-repartition-g<N> (one per source topic, as generation 1), owns key groups by
-- range over its task count, and its stores (copies of the subtopology's, `of_store`)
-- log to <id>-<store>-changelog-g<N>.
-- A subtopology without a generation of its own (generation 0: it reads its input by input
-- partition) moves to generation 1 the same way, and gains then the passthrough that a
-- `tasks` setting gives at start (appended before generation 1, with its task count): its
-- input topics are read by the passthrough from then on, and generation 0's tasks drain
-- at the offsets they had processed when they heard of the move.
local function add_later_generations(plan, id, gens, topic)
  local last = {}
  for _, sub in ipairs(plan.subtopologies) do
    if sub.generation == 1 then last[sub.index] = 1 end
  end
  local nstores = #plan.stores
  for _, e in ipairs(gens) do
    local base = plan.subtopologies[e.s]
    local g = (last[e.s] or 0) + 1
    last[e.s] = g
    if g == 1 then
      local pass = { index = #plan.subtopologies + 1, topics = {}, sources = {},
                     passthrough = true, of = e.s, tasks = e.n }
      plan.subtopologies[pass.index] = pass
      base.inputs = {}
      for k, ti in ipairs(base.topics) do
        pass.topics[k] = ti
        base.inputs[k] = plan.topics[ti].name
      end
    end
    local sub = { index = #plan.subtopologies + 1, topics = {}, sources = base.sources,
                  tasks = e.n, generation = g, of = e.s, gen_topic = {} }
    plan.subtopologies[sub.index] = sub
    for k, ti in ipairs(base.topics) do
      local name, gi = claim_gen_topic(topic, id, e.s, g, k, #base.topics, e.n, sub.index,
                                       plan.topics[ti].source_node)
      sub.topics[k] = gi
      sub.gen_topic[base.inputs[k]] = name
      if g == 1 then
        -- the input is the passthrough's now (C follows: bk_plan_grow)
        local input = plan.topics[ti]
        input.sub, input.pass_to = sub.index - 1, gi
        plan.gen_topic[input.name] = name
      end
    end
    for i = 1, nstores do
      local st = plan.stores[i]
      if st.sub == e.s then
        local copy = {}
        for key, v in pairs(st) do copy[key] = v end
        copy.sub, copy.of_store, copy.changelog_other = sub.index, i, nil
        copy.changelog = string.format("%s-%s-changelog-g%d", id, st.name, g)
        plan.stores[#plan.stores + 1] = copy
      end
    end
  end
end

-- The plan C needs: topics (sources first, in declaration order, then sinks, then the
-- generations' topics), and subtopologies (connected groups of nodes) with their source
-- topics, then the passthrough ones of subtopologies given a task count (`tasks`).
-- Deterministic, so every VM of a node numbers topics the same way. opts.logical: the
-- plan without generations (beck.testing moves its tasks by key group itself).
function App:describe(opts)
  local logical = opts and opts.logical
  if logical and self._logical then return self._logical end
  if not logical and self._plan then return self._plan end
  local parent_of = {}
  local function find(n)
    while parent_of[n] and parent_of[n] ~= n do n = parent_of[n] end
    return n
  end
  local function union(x, y)
    local a, b = find(x), find(y)
    if a ~= b then parent_of[b] = a end
  end
  for _, node in ipairs(self.order) do
    parent_of[node.name] = parent_of[node.name] or node.name
    for _, p in ipairs(node.parents) do union(p, node.name) end
  end
  -- Processors sharing a store run in one task, so in one subtopology (as
  -- Kafka Streams groups them): their inputs become co-partitioned.
  for _, st in ipairs(self.store_order) do
    for i = 2, #st.processors do union(st.processors[1], st.processors[i]) end
  end
  local topics, topic_index, subs, sub_of_root = {}, {}, {}, {}
  local function topic(name)
    local i = topic_index[name]
    if not i then
      i = #topics + 1
      topics[i] = { name = name, source = false, sink = false }
      topic_index[name] = i
    end
    return topics[i], i
  end
  for _, node in ipairs(self.order) do
    if node.kind == "source" then
      local root = find(node.name)
      local sub = sub_of_root[root]
      if not sub then
        sub = { index = #subs + 1, topics = {}, sources = {} }
        subs[#subs + 1] = sub
        sub_of_root[root] = sub
      end
      sub.sources[#sub.sources + 1] = node.name
      for _, name in ipairs(node.topics) do
        local t, i = topic(name)
        if t.source then
          error(string.format("topic '%s' is read by two sources ('%s' and '%s')", name,
                              t.source_node, node.name), 0)
        end
        t.source, t.source_node, t.sub = true, node.name, sub.index
        t.internal, t.partitions = node.internal, node.partitions
        sub.topics[#sub.topics + 1] = i
      end
    end
  end
  if #subs == 0 then
    error(string.format("app '%s' (%s) has no source", self.config.id, self.where), 0)
  end
  for _, node in ipairs(self.order) do
    if node.kind == "sink" then
      local t, i = topic(node.topic)
      t.sink = true
      node.topic_index = i
    end
  end
  for _, node in ipairs(self.order) do
    node.sub = sub_of_root[find(node.name)]
    if not node.sub then
      error(string.format("%s '%s' (%s) is not connected to any source", node.kind, node.name,
                          node.where), 0)
    end
  end
  local stores, store_index = {}, {}
  for i, st in ipairs(self.store_order) do
    local sub
    for _, pname in ipairs(st.processors) do
      local psub = self.nodes[pname].sub
      if sub and psub ~= sub then
        error(string.format("store '%s' (%s) is used by processors of two subtopologies", st.name,
                            st.where), 0)
      end
      sub = psub
    end
    stores[i] = { name = st.name, logged = st.logged, window = st.window, sub = sub.index,
                  versioned = st.versioned, history_retention = st.history_retention,
                  retention = st.retention, ttl = st.ttl, ttl_wall = st.ttl_wall,
                  timestamped = st.timestamped,
                  key_serde = st.key_serde,
                  value_serde = st.value_serde,
                  changelog = self.config.id .. "-" .. st.name .. "-changelog" }
    store_index[st.name] = i
  end
  local globals, global_index = {}, {}
  for i, g in ipairs(self.global_order or {}) do
    if self.stores[g.name] then
      error(string.format("global store '%s' (%s): a store of that name is declared at %s",
                          g.name, g.where, self.stores[g.name].where), 0)
    end
    if topic_index[g.topic] then
      error(string.format("global store '%s' (%s): topic '%s' is also read or written by the " ..
                          "app's nodes", g.name, g.where, g.topic), 0)
    end
    globals[i] = { name = g.name, topic = g.topic, key_serde = g.key_serde,
                   value_serde = g.value_serde }
    global_index[g.name] = i
  end
  local plan = { id = self.config.id, topics = topics, topic_index = topic_index,
                 subtopologies = subs, stores = stores, store_index = store_index,
                 globals = globals, global_index = global_index, gen_topic = {} }
  if logical then
    self._logical = plan
  else
    local nsubs = #subs
    local tasks = parse_tasks(self.config.tasks, nsubs)
    local gens = parse_generations(self.config.generations, nsubs)
    add_generations(plan, self.config.id, tasks, topic)
    add_later_generations(plan, self.config.id, gens, topic)
    self._plan = plan
  end
  return plan
end

return M
