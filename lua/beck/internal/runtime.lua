-- beck.internal.runtime: runs a topology's processors inside one stream
-- thread. C hands it records in batches (bk_io_t, an FFI array); this module
-- turns each into Lua strings, calls the source's children and sends what
-- reaches a sink back to C through FFI. The per-record loop stays free of
-- C API calls, varargs and pcall so that LuaJIT compiles it.
local ffi = require "ffi"
ffi.cdef(require "beck.internal.cdef")
local store = require "beck.internal.store"
local versioned = require "beck.internal.versioned"
local params = require "beck.internal.params"

local C = ffi.C
local ffi_string = ffi.string
local tonumber, error, type, setmetatable = tonumber, error, type, setmetatable
local string_format = string.format

local M = {}

-- What a source hands its children for a record's key or value (node_fns): nothing (no
-- child could read it), a Lua string of it, or RAW, a stand-in for the record's own bytes
-- when every processor on the way only passes it to ctx:forward (beck.internal.params)
-- and it ends in sinks, which produce the bytes as they are: no string made, interned
-- and swept. Ordered so that the largest need of a source's children wins.
local PASS_NONE, PASS_RAW, PASS_STRING = 0, 1, 2
local RAW = setmetatable({}, { __tostring = function() return "beck: a record's own bytes" end })
M.RAW = RAW

-- A chain of processors calls the same functions (the DSL's, a reused
-- processor table) at several depths of one record's call stack, which
-- LuaJIT takes for recursion and stops unrolling after 3 (`callunroll`):
-- at depth 6 a record then cost 1.3 us instead of ~0.1. Chains are short
-- and bounded by the topology, so let the recorder follow them.
jit.opt.start("callunroll=64")

-- Log levels of runtime/base/log.h.
local LEVELS = { error = 0, warn = 1, info = 2, debug = 3 }
M.LEVELS = LEVELS

-- -- The processor context ----------------------------------------------------

local Ctx = {}
Ctx.__index = Ctx

-- ctx:forward(key, value [, child]): to every child, or to the named one.
--
-- A record's path is a chain of calls that LuaJIT compiles into one trace,
-- and a trace guards the identity of every function it calls. So the
-- functions on the path are the topology's, not a task's: each node gets one
-- forward and one call function per stream thread, shared by all the
-- thread's tasks, and a task's state travels as data (each node's context
-- for that task). A thread holding 64 tasks with functions of their own made
-- every record leave the loop's trace by a chain of side traces, some of
-- them back to the interpreter (perf: a third of the thread in LuaJIT's VM).
-- Each node's functions are distinct ones, compiled from these sources with
-- load, rather than one function re-entered at every depth of a chain, which
-- LuaJIT takes for recursion and stops compiling (1.3 us a record at depth
-- 6). A node's forward calls its children directly (no loop: a
-- one-iteration loop at every depth of a chain also stops the trace); child
-- i is called with self._cctx[i], its context in the same task.
local function forward_src(n)
  local calls, names = {}, {}
  for i = 1, n do
    names[i] = "c" .. i
    calls[i] = "    c" .. i .. "(cc[" .. i .. "], key, value)"
  end
  return table.concat {
    "local error, string_format, tostring, index_of, calls",
    n > 0 and (", " .. table.concat(names, ", ")) or "", " = ...\n",
    "return function(self, key, value, child)\n",
    "  if child == nil then\n",
    "    local cc = self._cctx\n", table.concat(calls, "\n"), "\n",
    "  else\n",
    "    local i = index_of[child]\n",
    "    if i == nil then\n",
    "      error(string_format(\"forward: processor '%s' has no child '%s'\", self.name,\n",
    "                          tostring(child)), 2)\n",
    "    end\n",
    "    calls[i](self._cctx[i], key, value)\n",
    "  end\n",
    "end\n" }
end

-- A processor's call function: (ctx, key, value) -> its process. A processor
-- defined by a table has one process for every task; one defined by a
-- function makes an instance per task, whose process is in its context.
local CALL_SRC = [[
local process = ...
return function(ctx, key, value) return process(ctx, key, value) end
]]
local CALL_INSTANCE_SRC = [[
return function(ctx, key, value) return ctx._process(ctx, key, value) end
]]

-- calls: the children's call functions; index_of: child name -> position.
local function new_forward(calls, index_of)
  local n = #calls
  if n > 16 then
    -- many children: a loop (rare; fan-out that wide is not a hot chain)
    return function(self, key, value, child)
      local cc = self._cctx
      if child == nil then
        for i = 1, n do calls[i](cc[i], key, value) end
      else
        local i = index_of[child]
        if i == nil then
          error(string_format("forward: processor '%s' has no child '%s'", self.name,
                              tostring(child)), 2)
        end
        calls[i](cc[i], key, value)
      end
    end
  end
  return assert(load(forward_src(n), "=beck.internal.runtime:forward"))(
    error, string_format, tostring, index_of, calls, unpack(calls, 1, n))
end

-- ctx:forward_at(timestamp, key, value [, child]): forwards with another
-- timestamp (ms), which sinks write instead of the input record's (a join of
-- two records carries the later of their times).
function Ctx:forward_at(ts, key, value, child)
  if type(ts) ~= "number" then
    error("forward_at: the timestamp must be a number of ms", 2)
  end
  local task = self._task
  local saved = task.ts
  task.ts = ts
  self:forward(key, value, child)
  task.ts = saved
end

local function current(self)
  local task = self._task
  if task.cur < 0 then return nil end
  return task.io.recs[task.cur]
end

function Ctx:topic()
  local r = current(self)
  return r and self._task.topics[r.topic + 1].name
end

function Ctx:partition()
  local r = current(self)
  return r and r.partition
end

function Ctx:offset()
  local r = current(self)
  return r and tonumber(r.offset)
end

-- Timestamp of the record in hand (ms); in a punctuation, its time.
function Ctx:timestamp()
  return self._task.ts
end

-- Headers of the record in hand as { name = value } (the last of a repeated
-- name wins); an empty table in a punctuation.
function Ctx:headers()
  local task = self._task
  if task.cur < 0 then return {} end
  return task.rt.env.headers(task)
end

-- The task this context belongs to, as "<subtopology>_<partition>".
function Ctx:task_id()
  return self._task.id
end

-- ctx:log(level, fmt, ...) with level "error" | "warn" | "info" | "debug".
function Ctx:log(level, fmt, ...)
  local lv = LEVELS[level]
  if lv == nil then
    error("log: level must be error, warn, info or debug, got " .. tostring(level), 2)
  end
  local msg = select("#", ...) > 0 and string_format(fmt, ...) or tostring(fmt)
  msg = string_format("task %s %s: %s", self._task.id, self.name, msg)
  C.bk_ffi_log(lv, msg, #msg)
end

-- A global table, read-only (app:global_table): the same object for every task of a
-- runtime; its rows are what the node's global thread last committed.
local GlobalStore = {}
GlobalStore.__index = GlobalStore

function GlobalStore:get(key)
  if type(key) ~= "string" then
    error(string_format("global table '%s': get: the key must be a string, got %s", self.name,
                        type(key)), 2)
  end
  return self.env.global_get(self.name, key)
end

local function read_only(self)
  error(string_format("global table '%s' is read-only: its topic is what changes it", self.name),
        2)
end
GlobalStore.put, GlobalStore.delete = read_only, read_only

-- ctx:store(name): a store connected to this processor (app:store), or a global table
-- (app:global_table), which every processor may read.
function Ctx:store(name)
  local st = self._stores[name]
  if st then return st end
  local plan = self._task.plan
  if plan.global_index and plan.global_index[name] then
    local rt = self._task.rt
    rt.global_stores = rt.global_stores or {}
    st = rt.global_stores[name]
    if not st then
      st = setmetatable({ name = name, env = rt.env }, GlobalStore)
      rt.global_stores[name] = st
    end
    self._stores[name] = st
    return st
  end
  if plan.store_index[name] then
    error(string_format("processor '%s' is not connected to store '%s' (list it in " ..
                        "app:store(\"%s\", ..., \"%s\"))", self.name, tostring(name), name,
                        self.name), 2)
  end
  error(string_format("processor '%s' asked for store '%s', which is not declared " ..
                      "(app:store)", self.name, tostring(name)), 2)
end

-- ctx:schedule(ms, fn [, "wall" | "stream"]): calls fn(ctx, time) every `ms`
-- of wall-clock time (the default) or of the task's stream time (the largest
-- record timestamp it has seen). Returns a handle with :cancel().
function Ctx:schedule(interval, fn, kind)
  if type(interval) ~= "number" or interval <= 0 or type(fn) ~= "function" then
    error("schedule: expected an interval in ms (> 0) and a function", 2)
  end
  kind = kind or "wall"
  local task, rt = self._task, self._task.rt
  local p = { ctx = self, task = task, interval = interval, fn = fn }
  function p.cancel() p.cancelled = true end
  if kind == "wall" then
    p.due = rt.now() + interval
    rt.schedules[#rt.schedules + 1] = p
    rt.reschedule()
  elseif kind == "stream" then
    -- first due at the next multiple of the interval past the stream time
    local base = task.stream_time >= 0 and task.stream_time or 0
    p.due = base - base % interval + interval
    task.stream_schedules[#task.stream_schedules + 1] = p
    task.stream_due = math.min(task.stream_due, p.due)
  else
    error("schedule: the kind must be \"wall\" or \"stream\", got " .. tostring(kind), 2)
  end
  return p
end

-- (DSL) n records dropped as late for store `name`: counted for /metrics where the
-- runtime counts (a stream thread; the test driver has dsl.stats).
function Ctx:_late(name, n)
  local task = self._task
  local late, idx = task.rt.env.late, task.store_index[name]
  if late and idx then late(task.slot, idx, n or 1) end
end

-- Stream time of the task (ms), -1 before its first record.
function Ctx:stream_time()
  return self._task.stream_time
end

-- -- Building tasks ----------------------------------------------------------

local function instantiate(node)
  local def = node.def
  if type(def) == "function" then
    def = def()
    if type(def) ~= "table" or type(def.process) ~= "function" then
      error(string_format("processor '%s' (%s): its function must return a table with " ..
                          "process(ctx, key, value)", node.name, node.where), 0)
    end
  end
  return def
end

-- What node `name` needs of a record's key (n = 2) or value (n = 3): PASS_NONE,
-- PASS_RAW or PASS_STRING. RAW only where the runtime's sinks resolve it (env.raw).
local function pass_mode(rt, app, name, n)
  local node = app.nodes[name]
  if node.kind == "sink" then return rt.env.raw and PASS_RAW or PASS_STRING end
  if node.kind ~= "processor" or type(node.def) ~= "table" then return PASS_STRING end
  local process = node.def.process
  if not params.reads(process, n) then return PASS_NONE end
  if not rt.env.raw or not params.forwards_only(process, n) then return PASS_STRING end
  local mode = PASS_NONE
  for _, cname in ipairs(node.children) do mode = math.max(mode, pass_mode(rt, app, cname, n)) end
  return mode
end

-- The functions of a node, made once per runtime and shared by its tasks:
-- { call = f(ctx, key, value), forward = the processor's or source's forward,
-- key_mode, value_mode = (a source) what its children need of a record's key and value
-- (pass_mode) }. A sink's context is the task itself.
local function node_fns(rt, app, name)
  local made = rt.node_fns[name]
  if made then return made end
  local node = app.nodes[name]
  made = {}
  if node.kind == "sink" then
    made.call = rt.env.sink(node.topic_index - 1)
  else
    local calls, index_of = {}, {}
    for i, cname in ipairs(node.children) do
      calls[i] = node_fns(rt, app, cname).call
      index_of[cname] = i
    end
    made.forward = new_forward(calls, index_of)
    if node.kind == "source" then
      made.call = made.forward -- called as (source context, key, value)
      -- What its children need of the key and value: the loop makes a string only for
      -- PASS_STRING (a count never reads the value; an identity reads neither)
      made.key_mode, made.value_mode = PASS_NONE, PASS_NONE
      for _, cname in ipairs(node.children) do
        made.key_mode = math.max(made.key_mode, pass_mode(rt, app, cname, 2))
        made.value_mode = math.max(made.value_mode, pass_mode(rt, app, cname, 3))
      end
    elseif type(node.def) == "table" then
      made.call = assert(load(CALL_SRC, "=beck.internal.runtime:process"))(node.def.process)
    else
      made.call = assert(load(CALL_INSTANCE_SRC, "=beck.internal.runtime:process"))()
    end
  end
  rt.node_fns[name] = made
  return made
end

-- Builds one task: its stores and each node's context in it.
-- stream_time: what the task's last commit said (a task opened again goes on from it, as
-- in Kafka Streams), -1 none.
local function build_task(rt, app, plan, index, sub_index, partition, stream_time)
  local task = { sub = sub_index, partition = partition, io = rt.io, rt = rt,
                 topics = plan.topics, plan = plan, cur = -1, ts = 0, ctxs = {}, sources = {},
                 slot = index, store_index = {},
                 stores = {}, stream_time = stream_time or -1, stream_due = math.huge, stream_schedules = {},
                 id = string_format("%d_%d", sub_index, partition) }
  for i, st in ipairs(plan.stores) do
    if st.sub == sub_index + 1 then
      local ptr = rt.env.store_ptr(index, i - 1)
      if ptr == nil then
        error(string_format("task %s: store '%s' is not open", task.id, st.name), 0)
      end
      task.store_index[st.name] = i - 1
      task.stores[st.name] = store.new(ptr, st.name, task, rt.cache,
                                       st.ttl and { ms = st.ttl, wall = st.ttl_wall } or nil)
      -- (a timestamped store's "time to live" is forever: nothing to sweep)
      if st.ttl and not st.timestamped then rt.ttl_stores[#rt.ttl_stores + 1] = task.stores[st.name] end
    end
  end
  local ctx_of = {}
  local sub = plan.subtopologies[sub_index + 1]

  local function node_ctx(name)
    if ctx_of[name] then return ctx_of[name] end
    local node = app.nodes[name]
    if node.kind == "sink" then
      ctx_of[name] = task
      return task
    end
    local fns = node_fns(rt, app, name)
    local cctx = {}
    for i, cname in ipairs(node.children) do cctx[i] = node_ctx(cname) end
    local ctx
    if node.kind == "source" then
      ctx = { name = name, _cctx = cctx }
    else
      local inst = type(node.def) == "table" and node.def or instantiate(node)
      local stores = {}
      for _, sname in ipairs(node.stores or {}) do
        stores[sname] = task.stores[sname]
        local pst = plan.stores[plan.store_index[sname]]
        if pst and pst.versioned then
          -- a versioned store's face (put(k, v, time), get, get_as_of), one for the task
          stores[sname] = versioned.of(task.stores[sname], pst.history_retention,
                                       task.stream_time)
        end
      end
      ctx = setmetatable({ name = name, _task = task, _cctx = cctx, _inst = inst,
                           _process = inst.process, _stores = stores, forward = fns.forward },
                         Ctx)
      task.ctxs[#task.ctxs + 1] = ctx
    end
    ctx_of[name] = ctx
    return ctx
  end

  -- task.sources[topic index] = { call, context } of the source reading it: a topic of
  -- its own generation's when its subtopology has one (app.lua, `tasks`), whose
  -- processors are those of the subtopology it is a generation of (sub.of). A passthrough
  -- subtopology has no sources: C forwards its records.
  for _, sname in ipairs(sub.sources) do
    local ctx = node_ctx(sname)
    local fns = node_fns(rt, app, sname)
    for _, topic in ipairs(app.nodes[sname].topics) do
      local t = plan.topic_index[sub.gen_topic and sub.gen_topic[topic] or topic] - 1
      task.sources[t] = ctx
      rt.source_calls[t] = fns.call
      rt.source_keys[t], rt.source_values[t] = fns.key_mode, fns.value_mode
    end
  end
  return task
end

-- Fires the stream-time punctuations of a task that are due.
local function stream_punctuate(task)
  local now, next_due, kept = task.stream_time, math.huge, {}
  for _, p in ipairs(task.stream_schedules) do
    if not p.cancelled then
      if p.due <= now then
        task.cur, task.ts = -1, now
        p.due = now - now % p.interval + p.interval
        local ok, err = pcall(p.fn, p.ctx, now)
        if not ok then task.rt.punctuation_error(err) end
      end
      if not p.cancelled then
        kept[#kept + 1] = p
        if p.due < next_due then next_due = p.due end
      end
    end
  end
  task.stream_schedules = kept
  task.stream_due = next_due
end

-- What a stream thread of runtime/engine/thread.c gives the runtime: its stores,
-- sinks that produce through FFI, the input's headers and the wall clock.
-- beck.testing gives another (in-memory topics, a controlled clock).
local function thread_env(thr)
  local env = { raw = true }
  local hname, hvalue, hsize = ffi.new("const char *[1]"), ffi.new("const char *[1]"),
                               ffi.new("size_t[1]")
  function env.store_ptr(task_index, store_index)
    return C.bk_ffi_thread_store(thr, task_index, store_index)
  end
  local gindex, gval, glen, gpin = {}, ffi.new("const char *[1]"), ffi.new("size_t[1]"),
                                   ffi.new("void *[1]")
  -- a global table's row: from the node's global DB (engine/global.c), any thread
  function env.global_get(name, key)
    local i = gindex[name]
    if not i then
      i = C.bk_ffi_global_index(name)
      if i < 0 then error(string_format("global table '%s' is not open", name), 0) end
      gindex[name] = i
    end
    local rc = C.bk_ffi_global_get(i, key, #key, gval, glen, gpin)
    if rc == 1 then
      local v = ffi_string(gval[0], glen[0])
      C.bk_ffi_global_unpin(gpin[0])
      return v
    end
    if rc < 0 then error(string_format("global table '%s': the read failed (logged)", name), 0) end
    return nil
  end
  -- A sink's call function, shared by the thread's tasks (called with the task).
  function env.sink(topic_index)
    return function(task, key, value)
      local klen, vlen
      if key == RAW then
        local r = task.io.recs[task.cur]
        key, klen = r.key, r.key_len
      else
        klen = key and #key or 0
      end
      if value == RAW then
        local r = task.io.recs[task.cur]
        value, vlen = r.value, r.value_len
      else
        vlen = value and #value or 0
      end
      if C.bk_ffi_thread_send(thr, topic_index, key, klen, value, vlen, task.ts,
                              task.cur) ~= 0 then
        error(ffi_string(C.bk_ffi_thread_error(thr)), 0)
      end
    end
  end
  function env.headers(task)
    local out = {}
    local n = C.bk_ffi_thread_header_count(thr, task.cur)
    for i = 0, n - 1 do
      if C.bk_ffi_thread_header_get(thr, task.cur, i, hname, hvalue, hsize) == 0 then
        out[ffi_string(hname[0])] = hvalue[0] ~= nil and ffi_string(hvalue[0], hsize[0]) or false
      end
    end
    return out
  end
  function env.now() return tonumber(C.bk_ffi_clock_ms()) end
  -- records a task (its slot) dropped as late for a store (plan index): /metrics counts them
  function env.late(slot, store_index, n)
    C.bk_ffi_thread_late(thr, slot, store_index, n)
  end
  function env.punctuation_error(err)
    local msg = tostring(err)
    C.bk_ffi_thread_punctuation_failed(thr, msg, #msg)
  end
  return env
end

-- Entries a store with a time to live looks at per commit for expired ones (each commit goes
-- on where the last stopped, round and round).
local TTL_SWEEP = 10000

-- runtime.new(app, io, thread, tasks, cache_bytes [, env]) -> functions for
-- C: run(start), punctuate(now), flush(), init(), close(), hook(name, info),
-- and for tasks that come and go while the thread runs: add_task(slot, sub,
-- partition), init_task(slot), close_task(slot), drop_task(slot).
-- Called by runtime/engine/thread.c once per stream thread (and by beck.testing
-- with its own env); `tasks` lists { subtopology (0-based), partition }, task i
-- in slot i - 1. A record's `task` is its slot: C's slots are the app's task
-- indices, so a thread's tasks may be any of them.
function M.new(app, io_ptr, thr_ptr, task_list, cache_bytes, env)
  local io = ffi.cast("bk_io_t *", io_ptr)
  local rt = { io = io, env = env or thread_env(ffi.cast("bk_thread_t *", thr_ptr)),
               schedules = {}, cache = store.new_cache(cache_bytes or 0),
               node_fns = {}, source_calls = {}, source_keys = {}, source_values = {},
               ttl_stores = {} }
  local plan = app:describe(rt.env.logical and { logical = true } or nil)
  local tasks = {} -- [slot + 1] = task
  local order = {} -- the tasks in the order they were added (init and close go by it)

  rt.now = rt.env.now
  rt.punctuation_error = rt.env.punctuation_error or function(err) error(err, 0) end

  function rt.reschedule()
    local next_due = -1
    for _, p in ipairs(rt.schedules) do
      if not p.cancelled and (next_due < 0 or p.due < next_due) then next_due = p.due end
    end
    io.next_wall_ms = next_due
  end

  local fns = {}

  local function init_one(task)
    for _, ctx in ipairs(task.ctxs) do
      if ctx._inst.init then ctx._inst.init(ctx) end
    end
  end

  local function close_one(task)
    task.cur = -1
    for _, ctx in ipairs(task.ctxs) do
      if ctx._inst.close then
        local ok, err = pcall(ctx._inst.close, ctx)
        if not ok then
          local msg = string_format("task %s %s: close failed: %s", task.id, ctx.name,
                                    tostring(err))
          C.bk_ffi_log(LEVELS.error, msg, #msg)
        end
      end
    end
    task.closed = true
  end

  function fns.add_task(slot, sub, partition, stream_time)
    local task = build_task(rt, app, plan, slot, sub, partition, stream_time)
    tasks[slot + 1] = task
    order[#order + 1] = task
  end

  -- The plan grew by later generations ("S=N,S=N", the whole list so far): described again,
  -- so that their tasks are built from it. What exists keeps its indices (an app's plan
  -- only appends), so the tasks already built are left as they are.
  function fns.regrow(generations)
    app.config.generations = generations ~= "" and generations or nil
    app._plan, app._logical = nil, nil -- describe's cache
    plan = app:describe(rt.env.logical and { logical = true } or nil)
  end

  -- init(ctx) of every processor of one task (a task added while the thread runs)
  function fns.init_task(slot)
    init_one(tasks[slot + 1])
  end

  -- close(ctx) of one task's processors: what they forward is committed with the rest
  function fns.close_task(slot)
    close_one(tasks[slot + 1])
  end

  -- Forgets a closed task, once committed: its schedules, its stores' cached entries.
  function fns.drop_task(slot)
    local task = tasks[slot + 1]
    if not task then return end
    tasks[slot + 1] = nil
    for i = #order, 1, -1 do
      if order[i] == task then table.remove(order, i) end
    end
    for _, p in ipairs(rt.schedules) do
      if p.task == task then p.cancelled = true end
    end
    rt.reschedule()
    for _, st in pairs(task.stores) do
      rt.cache.drop(st)
      for i = #rt.ttl_stores, 1, -1 do
        if rt.ttl_stores[i] == st then table.remove(rt.ttl_stores, i) end
      end
    end
  end

  for i, t in ipairs(task_list) do
    fns.add_task(i - 1, t[1], t[2])
  end

  -- init(ctx) of every processor of every task, in declaration order
  function fns.init()
    for _, task in ipairs(order) do init_one(task) end
  end

  -- The record loop. C catches an error, reads io.cur and calls run again
  -- after the failed record when the policy says so.
  function fns.run(start)
    local recs, n, source_calls, source_keys, source_values = io.recs, io.count,
      rt.source_calls, rt.source_keys, rt.source_values
    for i = start, n - 1 do
      io.cur = i
      local r = recs[i]
      local task = tasks[r.task + 1]
      local t = r.topic
      local key, value
      if r.key ~= nil then
        local m = source_keys[t]
        if m == PASS_STRING then key = ffi_string(r.key, r.key_len)
        elseif m == PASS_RAW then key = RAW end
      end
      if r.value ~= nil then
        local m = source_values[t]
        if m == PASS_STRING then value = ffi_string(r.value, r.value_len)
        elseif m == PASS_RAW then value = RAW end
      end
      local ts = tonumber(r.timestamp)
      task.cur = i
      task.ts = ts
      source_calls[t](task.sources[t], key, value)
      task.cur = -1
      if ts > task.stream_time then
        task.stream_time = ts
        if ts >= task.stream_due then stream_punctuate(task) end
      end
    end
  end

  function fns.punctuate(now)
    local list = rt.schedules
    local kept = {}
    for _, p in ipairs(list) do
      if not p.cancelled then
        if p.due <= now then
          p.task.cur, p.task.ts = -1, now
          -- next time first: a failing fn must not fire again at once
          p.due = p.due + p.interval
          if p.due <= now then p.due = now + p.interval end
          p.fn(p.ctx, now)
        end
        if not p.cancelled then kept[#kept + 1] = p end
      end
    end
    -- schedules added during the punctuation are kept too
    for i = #list + 1, #rt.schedules do kept[#kept + 1] = rt.schedules[i] end
    rt.schedules = kept
    rt.reschedule()
  end

  -- The record cache to the stores (and their changelogs): C calls it first
  -- when it commits. Returns the cache's hits and misses since the last call.
  function fns.flush()
    local cache = rt.cache
    cache.flush()
    -- stores with a time to live: their expired entries go (store.lua, TtlStore:expire)
    for _, st in ipairs(rt.ttl_stores) do st:expire(TTL_SWEEP) end
    local hits, misses = cache.hits, cache.misses
    cache.hits, cache.misses = 0, 0
    return hits, misses
  end

  function fns.close()
    for _, task in ipairs(order) do
      if not task.closed then close_one(task) end
    end
  end

  -- Operational hooks of the app (app:hook): errors are the caller's to log.
  function fns.hook(name, info)
    local f = app.hooks[name]
    if f then f(info) end
  end

  fns.tasks = tasks -- for beck.testing ([slot + 1])
  return fns
end

return M
