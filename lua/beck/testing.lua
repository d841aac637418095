-- beck.testing: runs a topology in process, as Kafka Streams'
-- TopologyTestDriver does: the same runtime (lua/beck/internal/runtime.lua),
-- real RocksDB stores (runtime/engine/store.c) in a temporary directory, and an
-- in-memory stand-in for Kafka: input and output topics are Lua lists, time
-- is a clock the spec advances. No broker, no network. See docs/testing.md.
local ffi = require "ffi"
local runtime = require "beck.internal.runtime"
local versioned = require "beck.internal.versioned"
local app_mod = require "beck.app"

local C = ffi.C
local ffi_string = ffi.string

local M = {}

local Driver = {}
Driver.__index = Driver
local Input = {}
Input.__index = Input
local Output = {}
Output.__index = Output
local StoreReader = {}
StoreReader.__index = StoreReader

local POLICIES = { fail = true, skip = true, dlq = true }

local function load_app(topology)
  if app_mod.is_app(topology) then return topology end
  if type(topology) ~= "string" then
    error("driver: expected a topology file or a beck.app, got " .. type(topology), 3)
  end
  local chunk, err = loadfile(topology)
  if not chunk then error(err, 0) end
  local app = chunk()
  if not app_mod.is_app(app) then
    error(topology .. ": the topology must return its app (end the file with `return app`)", 0)
  end
  return app
end

local function tmpdir()
  local name = os.tmpname()
  os.remove(name)
  return name .. "-beck-driver"
end

local function setting(config, app, name, default)
  local v = config[name]
  if v == nil then v = app.config[name] end
  if v == nil then v = default end
  return v
end

-- driver(topology_file_or_app [, config]) -> driver
-- config: partitions (a number, or { topic = n }; default 1),
-- cache_max_bytes, on_error, dlq_topic, tasks, state_dir (default: a temporary
-- directory removed by :close()), wall_clock (start, ms; default 0).
function M.driver(topology, config)
  config = config or {}
  local app = load_app(topology)
  -- the logical plan: a subtopology given a task count (`tasks`) is moved to it by key
  -- group below, as :repartition() does, instead of through a passthrough topic
  local plan = app:describe { logical = true }
  local self = setmetatable({ app = app, plan = plan, config = config, outputs = {}, globals = {},
                              clock = config.wall_clock or 0, offsets = {}, pending = {},
                              skipped = 0, keep = {} }, Driver)
  self.on_error = setting(config, app, "on_error", "fail")
  if not POLICIES[self.on_error] then
    error("driver: on_error must be fail, skip or dlq, got " .. tostring(self.on_error), 2)
  end
  self.dlq_topic = setting(config, app, "dlq_topic", plan.id .. "-dlq")
  self.owns_dir = config.state_dir == nil
  self.state_dir = config.state_dir or tmpdir()

  -- Partitions of each topic: the config's, else 1; a subtopology has as
  -- many tasks as its topics have partitions.
  local parts = config.partitions or 1
  self.partitions = {}
  for _, t in ipairs(plan.topics) do
    self.partitions[t.name] = type(parts) == "table" and (parts[t.name] or 1) or parts
  end
  -- As runtime/cmd/cmd_run.c does: an internal topic read beside external ones
  -- takes their width; others the widest external input's.
  if type(parts) == "table" then
    local widest = 1
    for _, t in ipairs(plan.topics) do
      if t.source and not t.internal then widest = math.max(widest, self.partitions[t.name]) end
    end
    for _, t in ipairs(plan.topics) do
      if t.internal and parts[t.name] == nil then
        local w = widest
        for _, ti in ipairs(plan.subtopologies[t.sub].topics) do
          local o = plan.topics[ti]
          if not o.internal then w = self.partitions[o.name] end
        end
        self.partitions[t.name] = w
      end
    end
  end
  local task_list, task_of = {}, {}
  for s, sub in ipairs(plan.subtopologies) do
    local n = self.partitions[plan.topics[sub.topics[1]].name]
    for _, ti in ipairs(sub.topics) do
      local t = plan.topics[ti]
      if self.partitions[t.name] ~= n then
        error(string.format("driver: topics %s and %s feed one subtopology, so they need as " ..
                            "many partitions", plan.topics[sub.topics[1]].name, t.name), 2)
      end
    end
    task_of[s] = {}
    for p = 0, n - 1 do
      task_list[#task_list + 1] = { s - 1, p }
      task_of[s][p] = #task_list
    end
  end
  self.task_list, self.task_of = task_list, task_of
  self.generations = {} -- [sub] = { n =, gen =, task_of = { [q] = task index }, owner = { [g] = q } }

  -- Real stores: one DB per task with a store, as a stream thread opens them.
  self.drv = ffi.gc(C.bk_ffi_driver_new(#task_list), C.bk_ffi_driver_free)
  self.dirs = {} -- [task index] = its state directory
  for i, t in ipairs(task_list) do
    local names, flags = self:_store_specs(t[1] + 1)
    if names then
      local dir = string.format("%s/%s/%d_%d", self.state_dir, plan.id, t[1], t[2])
      local ok, err = pcall(self._open_task, self, i, dir, names, flags, 0)
      if not ok then
        C.bk_ffi_driver_free(ffi.gc(self.drv, nil))
        if self.owns_dir then os.execute("rm -rf '" .. self.state_dir:gsub("'", "") .. "'") end
        error(err, 2)
      end
    end
  end

  self.recs = ffi.new("bk_rec_t[1]")
  self.io = ffi.new("bk_io_t")
  self.io.recs, self.io.next_wall_ms = self.recs, -1
  local ok, err = pcall(function()
    self.fns = runtime.new(app, self.io, nil, task_list,
                           setting(config, app, "cache_max_bytes", 10485760), self:_env())
    self.fns.init()
    self:_drain()
    -- the `tasks` setting: those subtopologies start at their own task count, by key group
    local tasks = app_mod.parse_tasks(setting(config, app, "tasks"), #plan.subtopologies)
    for s = 1, #plan.subtopologies do
      if tasks[s] then self:repartition(s - 1, tasks[s]) end
    end
  end)
  if not ok then
    -- nothing of a driver that did not start may stay open or on disk
    C.bk_ffi_driver_free(ffi.gc(self.drv, nil))
    if self.owns_dir then os.execute("rm -rf '" .. self.state_dir:gsub("'", "") .. "'") end
    error(err, 0)
  end
  return self
end

-- The stores of subtopology s (1-based) as C arrays of names and BK_FFI_STORE_* flags, or
-- nil when it has none.
function Driver:_store_specs(s)
  local names, flags = {}, {}
  for _, st in ipairs(self.plan.stores) do
    if st.sub == s then
      names[#names + 1] = st.name
      flags[#flags + 1] = (st.logged and C.BK_FFI_STORE_LOGGED or 0) +
                          (st.window and C.BK_FFI_STORE_WINDOW or 0)
    end
  end
  if #names == 0 then return nil end
  local cnames, cflags = ffi.new("const char *[?]", #names), ffi.new("int32_t[?]", #names)
  for j = 1, #names do cnames[j - 1], cflags[j - 1] = names[j], flags[j] end
  self.keep_names = self.keep_names or {}
  self.keep_names[#self.keep_names + 1] = names -- the C strings point into these
  return { c = cnames, n = #names }, cflags
end

-- Opens task `idx`'s DB (1-based) in dir.
function Driver:_open_task(idx, dir, names, flags, level)
  if C.bk_ffi_driver_open_task(self.drv, idx - 1, dir, names.c, flags, names.n) ~= 0 then
    error("driver: " .. ffi_string(C.bk_ffi_driver_error(self.drv)), level > 0 and level + 1 or 0)
  end
  self.dirs[idx] = dir
end

-- The runtime's view of the world: stores from driver.c, sinks into the
-- in-memory topics, the driver's clock.
function Driver:_env()
  local env = { logical = true }
  local drv = self.drv
  function env.store_ptr(task_index, store_index)
    -- store_index is the plan's; the task's DB numbers its own stores
    local sub = self.task_list[task_index + 1][1] + 1
    local j = 0
    for i, st in ipairs(self.plan.stores) do
      if st.sub == sub then
        if i - 1 == store_index then return C.bk_ffi_driver_store(drv, task_index, j) end
        j = j + 1
      end
    end
    return nil
  end
  function env.sink(topic_index)
    local topic = self.plan.topics[topic_index + 1].name
    return function(task, key, value)
      if (key ~= nil and type(key) ~= "string") or (value ~= nil and type(value) ~= "string") then
        error(string.format("sink to %s: key and value must be strings or nil, got %s and %s",
                            topic, type(key), type(value)), 2)
      end
      -- a punctuation's records carry no headers (task.cur < 0)
      self:_append(topic, key, value, task.ts, task.cur >= 0 and self.current_headers or nil)
    end
  end
  function env.headers()
    local out = {}
    for k, v in pairs(self.current_headers or {}) do out[k] = v end
    return out
  end
  function env.now() return self.clock end
  -- global tables: the rows piped to their topics, kept here (the driver has no global DB)
  function env.global_get(name, key)
    return self.globals[name] and self.globals[name][key]
  end
  function env.punctuation_error(err)
    if self.on_error == "fail" then error(err, 0) end
    local msg = "punctuation failed: " .. tostring(err)
    C.bk_ffi_log(runtime.LEVELS.error, msg, #msg)
  end
  return env
end

-- Appends a record to a topic; a topic the app also reads is fed back in.
function Driver:_append(topic, key, value, ts, headers)
  local out = self.outputs[topic]
  if not out then
    out = { records = {}, next = 1 }
    self.outputs[topic] = out
  end
  local partition = self:_partition(topic, key)
  local offsets = self.offsets[topic] or {}
  self.offsets[topic] = offsets
  local offset = offsets[partition] or 0
  offsets[partition] = offset + 1
  local hcopy = {}
  for k, v in pairs(headers or {}) do hcopy[k] = v end
  local rec = { topic = topic, key = key, value = value, timestamp = ts, headers = hcopy,
                partition = partition, offset = offset }
  out.records[#out.records + 1] = rec
  if self.plan.topic_index[topic] and self.plan.topics[self.plan.topic_index[topic]].source then
    self.pending[#self.pending + 1] = rec
  end
end

function Driver:_partition(topic, key)
  local n = self.partitions[topic] or 1
  if key == nil or n == 1 then return 0 end
  return C.bk_ffi_hash_partition(key, #key, n)
end

-- Runs one record through the runtime, applying on_error.
function Driver:_process(rec)
  local ti = self.plan.topic_index[rec.topic]
  local sub = self.plan.topics[ti].sub
  local gen = self.generations[sub]
  -- a repartitioned subtopology's records go to the task owning their key's group (a record
  -- without a key to its first task), as its generation's repartition topic would deliver
  -- them: in its partition q (ctx:partition())
  local part = rec.partition
  if gen then part = rec.key and gen.owner[C.bk_ffi_hash_key_group(rec.key, #rec.key)] or 0 end
  local task = gen and gen.task_of[part] or self.task_of[sub][part]
  local r = self.recs[0]
  -- keep the strings alive while C pointers point into them
  self.keep[1], self.keep[2] = rec.key, rec.value
  r.key, r.key_len = rec.key, rec.key and #rec.key or 0
  r.value, r.value_len = rec.value, rec.value and #rec.value or 0
  r.task, r.topic, r.partition = task - 1, ti - 1, part
  r.offset, r.timestamp = rec.offset, rec.timestamp
  self.io.count = 1
  self.current_headers = rec.headers
  local ok, err = pcall(self.fns.run, 0)
  self.current_headers = nil
  self.io.count = 0
  if ok then return end
  local where = string.format("%s/%d/%d", rec.topic, rec.partition, rec.offset)
  if self.on_error == "skip" then
    self.skipped = self.skipped + 1
  elseif self.on_error == "dlq" then
    local h = {}
    for k, v in pairs(rec.headers or {}) do h[k] = v end
    h["beck.error"] = tostring(err)
    h["beck.topic"], h["beck.partition"], h["beck.offset"] =
      rec.topic, tostring(rec.partition), tostring(rec.offset)
    self:_append(self.dlq_topic, rec.key, rec.value, rec.timestamp, h)
  else
    error(string.format("process failed on record %s: %s", where, tostring(err)), 0)
  end
end

-- Processes what was fed back, then commits as a stream thread does.
function Driver:_drain()
  while #self.pending > 0 do
    local rec = table.remove(self.pending, 1)
    self:_process(rec)
  end
  self.fns.flush()
  if C.bk_ffi_driver_commit(self.drv) ~= 0 then
    error("driver: commit failed: " .. ffi_string(C.bk_ffi_driver_error(self.drv)), 0)
  end
end

-- -- Input topics ------------------------------------------------------------

-- A global table's topic: what is piped to it is its table's at once, before the next
-- record of any other topic (as a node's global table has caught up before tasks run).
local GlobalInput = {}
GlobalInput.__index = GlobalInput

function GlobalInput:pipe(key, value)
  if type(key) ~= "string" or (value ~= nil and type(value) ~= "string") then
    error("pipe: a global table's key must be a string, its value a string or nil", 2)
  end
  local rows = self.driver.globals[self.name]
  rows[key] = value -- nil: a tombstone deletes the row
  return self
end

function GlobalInput:pipe_list(records)
  for _, r in ipairs(records) do
    if r.key ~= nil or r.value ~= nil then self:pipe(r.key, r.value) else self:pipe(r[1], r[2]) end
  end
  return self
end

function Driver:input(topic)
  for _, g in ipairs(self.plan.globals or {}) do
    if g.topic == topic then
      self.globals[g.name] = self.globals[g.name] or {}
      return setmetatable({ driver = self, name = g.name }, GlobalInput)
    end
  end
  local ti = self.plan.topic_index[topic]
  if not ti or not self.plan.topics[ti].source then
    error(string.format("driver: the topology reads no topic '%s'", tostring(topic)), 2)
  end
  return setmetatable({ driver = self, topic = topic }, Input)
end

-- pipe(key, value [, timestamp [, headers]]): timestamp defaults to the
-- driver's wall clock.
function Input:pipe(key, value, timestamp, headers)
  local d = self.driver
  if d.closed then error("driver: closed", 2) end
  if (key ~= nil and type(key) ~= "string") or (value ~= nil and type(value) ~= "string") then
    error("pipe: key and value must be strings or nil", 2)
  end
  local partition = d:_partition(self.topic, key)
  local offsets = d.offsets[self.topic] or {}
  d.offsets[self.topic] = offsets
  local offset = offsets[partition] or 0
  offsets[partition] = offset + 1
  d.pending[#d.pending + 1] = { topic = self.topic, key = key, value = value,
                                timestamp = timestamp or d.clock, headers = headers or {},
                                partition = partition, offset = offset }
  d:_drain()
  return self
end

-- pipe_list({ {key, value [, timestamp [, headers]]} or {key=, value=, timestamp=, headers=} })
function Input:pipe_list(records)
  for _, r in ipairs(records) do
    if r.key ~= nil or r.value ~= nil or r.timestamp ~= nil or r.headers ~= nil then
      self:pipe(r.key, r.value, r.timestamp, r.headers)
    else
      self:pipe(r[1], r[2], r[3], r[4])
    end
  end
  return self
end

-- -- Output topics -------------------------------------------------------------

function Driver:output(topic)
  if type(topic) ~= "string" then error("driver: output: expected a topic name", 2) end
  return setmetatable({ driver = self, topic = topic }, Output)
end

local function queue(self)
  local out = self.driver.outputs[self.topic]
  if not out then
    out = { records = {}, next = 1 }
    self.driver.outputs[self.topic] = out
  end
  return out
end

-- The next unread record { key, value, timestamp, headers, partition,
-- offset }, or nil.
function Output:read()
  local q = queue(self)
  local rec = q.records[q.next]
  if rec then q.next = q.next + 1 end
  return rec
end

function Output:read_all()
  local list = {}
  for rec in function() return self:read() end do list[#list + 1] = rec end
  return list
end

-- The latest value per key of the unread records (a nil value deletes).
function Output:read_key_values()
  local kv = {}
  for _, rec in ipairs(self:read_all()) do
    if rec.key ~= nil then kv[rec.key] = rec.value end
  end
  return kv
end

function Output:is_empty()
  local q = queue(self)
  return q.records[q.next] == nil
end

-- -- Stores --------------------------------------------------------------------

function Driver:store(name)
  if self.plan.global_index and self.plan.global_index[name] then
    local rows = self.globals[name] or {}
    self.globals[name] = rows
    return { get = function(_, key) return rows[key] end }
  end
  if not self.plan.store_index[name] then
    error(string.format("driver: the topology has no store '%s'", tostring(name)), 2)
  end
  local pst = self.plan.stores[self.plan.store_index[name]]
  if pst.versioned then
    -- a versioned store: get(k) the latest version, get_as_of(k, time); each returns the
    -- value and its time
    local function ask(method, key, at)
      if self.closed then error("driver: closed", 3) end
      local tasks = self.fns.tasks -- [slot + 1]; a repartition leaves holes
      for i = 1, table.maxn(tasks) do
        local st = tasks[i] and tasks[i].stores[name]
        if st then
          local vst = versioned.of(st, pst.history_retention)
          local v, t = vst[method](vst, key, at)
          if t ~= nil then return v, t end
        end
      end
      return nil
    end
    return { get = function(_, key) return ask("get", key) end,
             get_as_of = function(_, key, at) return ask("get_as_of", key, at) end }
  end
  return setmetatable({ driver = self, name = name }, StoreReader)
end

local function each_task_store(self)
  if self.driver.closed then error("driver: closed", 3) end
  local list = {}
  local tasks = self.driver.fns.tasks -- [slot + 1]; a repartition leaves holes
  for i = 1, table.maxn(tasks) do
    local task = tasks[i]
    if task and task.stores[self.name] then list[#list + 1] = task.stores[self.name] end
  end
  return list
end

function StoreReader:get(key)
  for _, st in ipairs(each_task_store(self)) do
    local v = st:get(key)
    if v ~= nil then return v end
  end
  return nil
end

local function collect(self, method, ...)
  local rows = {}
  for _, st in ipairs(each_task_store(self)) do
    local it = st[method](st, ...)
    for k, v in it do rows[#rows + 1] = { k, v } end
  end
  table.sort(rows, function(a, b) return a[1] < b[1] end)
  local i = 0
  return function()
    i = i + 1
    if rows[i] then return rows[i][1], rows[i][2] end
  end
end

-- Iterators over every task's part of the store, in key order.
function StoreReader:range(from, to) return collect(self, "range", from, to) end
function StoreReader:prefix(p) return collect(self, "prefix", p) end
function StoreReader:all() return collect(self, "all") end

function StoreReader:count()
  local n = 0
  for _ in self:all() do n = n + 1 end
  return n
end

-- -- Time and the end ----------------------------------------------------------

function Driver:wall_clock()
  return self.clock
end

-- Moves the wall clock and fires the punctuations that came due.
function Driver:advance_wall_clock(ms)
  if type(ms) ~= "number" or ms < 0 then
    error("advance_wall_clock: expected a number of ms >= 0", 2)
  end
  if self.closed then error("driver: closed", 2) end
  self.clock = self.clock + ms
  -- as runtime/engine/thread.c: an error stops under fail, is logged otherwise
  while true do
    local due = tonumber(self.io.next_wall_ms)
    if due < 0 or due > self.clock then break end
    local ok, err = pcall(self.fns.punctuate, self.clock)
    if not ok then
      if self.on_error == "fail" then error(err, 0) end
      local msg = "punctuation failed: " .. tostring(err)
      C.bk_ffi_log(runtime.LEVELS.error, msg, #msg)
    end
  end
  self:_drain()
  return self
end

-- -- Repartitioning -----------------------------------------------------------

local KEY_GROUPS = 4096

local function group_range(q, n)
  local lo, hi = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
  C.bk_ffi_hash_group_range(q, n, lo, hi)
  return lo[0], hi[0]
end

-- driver:repartition(subtopology, n): moves subtopology `subtopology` (its number in task
-- ids, 0-based) to n tasks, as `beck repartition` does on a cluster (docs/repartitioning.md):
-- what was piped is processed and committed, its tasks close, n new tasks are built from
-- their state by key group (no replay), each owning the key groups
-- [q * 4096 / n, (q + 1) * 4096 / n), and are initialised; from then on the subtopology's
-- records go to the task owning their key's group. A new task's stream time is the largest
-- of the tasks it was built from. Returns the driver.
function Driver:repartition(sub, n)
  local plan = self.plan
  if type(sub) ~= "number" or sub % 1 ~= 0 or sub < 0 or sub >= #plan.subtopologies then
    error(string.format("driver:repartition: subtopology must be 0 to %d, got %s",
                        #plan.subtopologies - 1, tostring(sub)), 2)
  end
  if type(n) ~= "number" or n % 1 ~= 0 or n < 1 or n > KEY_GROUPS then
    error(string.format("driver:repartition: the task count must be 1 to %d, got %s",
                        KEY_GROUPS, tostring(n)), 2)
  end
  if self.closed then error("driver:repartition: the driver is closed", 2) end
  self:_drain()
  local s = sub + 1
  local old_gen = self.generations[s]
  local gen = old_gen and old_gen.gen + 1 or 1
  -- the old tasks: closed, committed, their DBs closed; their groups
  local old, stream_time = {}, {}
  local olds = old_gen and old_gen.task_of or self.task_of[s]
  for q, idx in pairs(olds) do
    local task = self.fns.tasks[idx]
    local lo, hi = 0, KEY_GROUPS -- by input partition: any group
    if old_gen then lo, hi = group_range(q, old_gen.n) end
    old[#old + 1] = { idx = idx, lo = lo, hi = hi, dir = self.dirs[idx],
                      stream_time = task and task.stream_time or -1 }
  end
  table.sort(old, function(a, b) return a.idx < b.idx end)
  for _, o in ipairs(old) do
    self.fns.close_task(o.idx - 1)
  end
  self:_drain() -- what close() forwarded
  for _, o in ipairs(old) do
    self.fns.drop_task(o.idx - 1)
    if o.dir and C.bk_ffi_driver_close_task(self.drv, o.idx - 1) ~= 0 then
      error("driver:repartition: " .. ffi_string(C.bk_ffi_driver_error(self.drv)), 2)
    end
  end
  -- the new tasks, each built from the old ones that hold its groups
  local names, flags = self:_store_specs(s)
  local first = #self.task_list + 1
  if C.bk_ffi_driver_grow(self.drv, first + n - 1) ~= 0 then
    error("driver:repartition: " .. ffi_string(C.bk_ffi_driver_error(self.drv)), 2)
  end
  local with_state = {}
  for _, o in ipairs(old) do
    if o.dir then with_state[#with_state + 1] = o end
  end
  local srcs = ffi.new("const char *[?]", #with_state + 1)
  local groups = ffi.new("int32_t[?]", 2 * #with_state + 2)
  local paths = {} -- srcs points into these strings: a local keeps them alive
  for k, o in ipairs(with_state) do
    paths[k] = o.dir .. "/rocksdb"
    srcs[k - 1], groups[2 * k - 2], groups[2 * k - 1] = paths[k], o.lo, o.hi
  end
  local new = { n = n, gen = gen, task_of = {}, owner = {} }
  for q = 0, n - 1 do
    local idx = first + q
    local lo, hi = group_range(q, n)
    for g = lo, hi - 1 do new.owner[g] = q end
    self.task_list[idx] = { sub, q }
    new.task_of[q] = idx
    if names then
      local dir = string.format("%s/%s/%d_%d-g%d", self.state_dir, plan.id, sub, q, gen)
      if #with_state > 0 and C.bk_ffi_driver_regroup(self.drv, dir .. "/rocksdb", srcs, groups,
                                                     #with_state, lo, hi) ~= 0 then
        error("driver:repartition: " .. ffi_string(C.bk_ffi_driver_error(self.drv)), 2)
      end
      self:_open_task(idx, dir, names, flags, 2)
    end
    self.fns.add_task(idx - 1, sub, q)
    local t = self.fns.tasks[idx]
    for _, o in ipairs(old) do
      if o.lo < hi and lo < o.hi and o.stream_time > t.stream_time then
        t.stream_time = o.stream_time
      end
    end
  end
  for q = 0, n - 1 do self.fns.init_task(first + q - 1) end
  self.generations[s] = new
  -- the old generation's state: nothing needs it any more
  for _, o in ipairs(with_state) do
    os.execute("rm -rf '" .. o.dir:gsub("'", "") .. "'")
    self.dirs[o.idx] = nil
  end
  self:_drain()
  return self
end

-- Runs close(ctx) of every processor, commits, closes the stores and
-- removes the state directory the driver made.
function Driver:close()
  if self.closed then return end
  self.closed = true
  self.fns.close()
  self:_drain()
  C.bk_ffi_driver_free(ffi.gc(self.drv, nil))
  self.drv = nil
  if self.owns_dir then
    os.execute("rm -rf '" .. self.state_dir:gsub("'", "") .. "'")
  end
end

return M
