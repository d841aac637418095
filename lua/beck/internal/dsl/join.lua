-- beck.internal.dsl.join: stream-table, table-table and stream-stream joins, with
-- Kafka Streams' semantics (docs/dsl.md, "Joins"). Both sides of a join
-- must be partitioned alike: a side whose key changed is repartitioned
-- first, and the join's nodes put both inputs in one subtopology, so their
-- topics need as many partitions.
local builder = require "beck.internal.dsl.builder"
local window = require "beck.internal.dsl.window"
local stream_mod = require "beck.internal.dsl.stream"
local table_mod = require "beck.internal.dsl.table"
builder.internal()

local type, setmetatable, ipairs = type, setmetatable, ipairs
local sub = string.sub
local string_format = string.format
local fail, check_fn, check_opts = builder.fail, builder.check_fn, builder.check_opts
local be64, dec64, prefix, index = window.be64, window.dec64, window.prefix, window.index

local M = {}

local NOTHING = { process = function() end }

-- Are nodes a and b in one connected part of the app (one subtopology)?
local function connected(app, a, b)
  local seen, stack = { [a] = true }, { a }
  while #stack > 0 do
    local n = app.nodes[table.remove(stack)]
    if n.name == b then return true end
    for _, list in ipairs { n.parents, n.children } do
      for _, m in ipairs(list) do
        if not seen[m] then
          seen[m] = true
          stack[#stack + 1] = m
        end
      end
    end
  end
  return false
end

-- copartition(b, name, a, c, where): joins the subtopologies of nodes a and
-- c, so that one task has both sides (and both stores): a node with both
-- as parents that does nothing.
local function copartition(b, name, a, c, where)
  if connected(b.app, a, c) then return end
  b:processor(b:derived(name .. "-copartition"), "copartition", NOTHING, { a, c }, where)
end

-- -- Stream-table ----------------------------------------------------------------------

-- Each stream record looks up the table's current value for its key:
-- inner: no row, no output; left: joiner(v, nil, k). Records without a
-- value are dropped; without a key, dropped by the inner join.
local function stream_table(s, t, joiner, opts, kind, where)
  if kind == "outer_join" then fail("outer_join: a stream joins a table with join or left_join") end
  if not t.getter then fail("%s: a windowed table cannot be joined", kind) end
  local b = s.b
  local name = b:name(kind, opts.name)
  local input = s.node
  if s.key_changed then
    input = b:repartition(s.node, name .. "-left", s.kser, s.vser, where,
                          { drop_nil_keys = kind == "join" })
  end
  local getter = t.getter
  if t.getter_as_of then
    -- a versioned table: the row as of the stream record's time (KIP-914)
    local as_of = t.getter_as_of
    getter = function(ctx)
      local get = as_of(ctx)
      return function(k) return get(k, ctx:timestamp()) end
    end
  end
  local def
  if kind == "join" then
    def = {
      init = function(ctx) ctx.get = getter(ctx) end,
      process = function(ctx, k, v)
        if k == nil or v == nil then return end
        local tv = ctx.get(k)
        if tv ~= nil then ctx:forward(k, joiner(v, tv, k)) end
      end,
    }
  else
    def = {
      init = function(ctx) ctx.get = getter(ctx) end,
      process = function(ctx, k, v)
        if v == nil then return end
        local tv = nil
        if k ~= nil then tv = ctx.get(k) end
        ctx:forward(k, joiner(v, tv, k))
      end,
    }
  end
  b:processor(name, kind, def, { input }, where)
  t:needs(name)
  copartition(b, name, name, t.node, where)
  return stream_mod.new(b, name, s.kser,
                        b:serde(opts.result_serde, nil, kind .. ": result_serde"), false)
end

-- -- Table-table -----------------------------------------------------------------------

-- Each side's update looks up the other side's current value.
--   join:       both present -> joiner(l, r); a side deleted while the other
--               is present -> deletion; the other absent -> nothing
--   left_join:  left present -> joiner(l, r or nil); left deleted ->
--               deletion; a right update without left -> nothing
--   outer_join: joiner(l or nil, r or nil), deletion when both are absent
-- (joiner gets the key as its third argument.)
local function combine(kind, joiner)
  if kind == "join" then
    return function(k, l, r)
      if l ~= nil and r ~= nil then return joiner(l, r, k) end
      return nil
    end
  elseif kind == "left_join" then
    return function(k, l, r)
      if l ~= nil then return joiner(l, r, k) end
      return nil
    end
  end
  return function(k, l, r)
    if l ~= nil or r ~= nil then return joiner(l, r, k) end
    return nil
  end
end

local function side_def(kind, left, getter, joiner)
  local both = combine(kind, joiner)
  local emit_without_other = kind == "outer_join" or (kind == "left_join" and left)
  return {
    init = function(ctx) ctx.get = getter(ctx) end,
    process = function(ctx, k, v)
      local o, ots = ctx.get(k)
      if o == nil and not emit_without_other then return end
      -- a deletion of a row that never was, with no row on the other side: nothing, as in
      -- Kafka Streams (its source says whether the row was there: table.lua)
      if v == nil and o == nil and ctx._task.had_row == false then return end
      -- the later of the two rows' times (Kafka Streams' KTableKTableJoin)
      local ts = ctx:timestamp()
      if o ~= nil and ots ~= nil and ots > ts then ts = ots end
      if left then
        ctx:forward_at(ts, k, both(k, v, o))
      else
        ctx:forward_at(ts, k, both(k, o, v))
      end
    end,
  }
end

local function table_table(l, r, joiner, opts, kind, where)
  if not l.getter or not r.getter then fail("%s: a windowed table cannot be joined", kind) end
  local b = l.b
  local name = b:name(kind, opts.name)
  local lp, rp = b:derived(name .. "-left"), b:derived(name .. "-right")
  b:processor(lp, kind, side_def(kind, true, r.getter, joiner), { l.node }, where)
  r:needs(lp)
  b:processor(rp, kind, side_def(kind, false, l.getter, joiner), { r.node }, where)
  l:needs(rp)
  local vser = b:serde(opts.result_serde, nil, kind .. ": result_serde")
  local store = opts.store
  local ks, vs = l.kser.serialize, vser.serialize
  local kw = string_format("%s (%s): store %s: key: ", kind, where, tostring(store))
  local vw = string_format("%s (%s): store %s: value: ", kind, where, tostring(store))
  b:processor(name, kind, {
    init = function(ctx) if store then ctx.st = ctx:store(store) end end,
    process = function(ctx, k, v)
      local st = ctx.st
      if st then
        if v == nil then st:delete(ks(k, kw)) else st:put(ks(k, kw), vs(v, vw)) end
      end
      ctx:forward(k, v)
    end,
  }, { lp, rp }, where)
  if store then
    b:store(store, { changelog = opts.changelog }, name, kind, where)
    return table_mod.materialized(b, name, store, l.kser, vser)
  end
  local both = combine(kind, joiner)
  local stores = {}
  for _, s in ipairs(l.stores) do stores[#stores + 1] = s end
  for _, s in ipairs(r.stores) do stores[#stores + 1] = s end
  local t = setmetatable({ b = b, node = name, kser = l.kser, vser = vser, stores = stores,
                          windowed = false }, table_mod.Table)
  function t.getter(ctx)
    local lg, rg = l.getter(ctx), r.getter(ctx)
    return function(k)
      local lv, lt = lg(k)
      local rv, rt = rg(k)
      local out = both(k, lv, rv)
      if out == nil then return nil end
      return out, (lt and rt) and math.max(lt, rt) or lt or rt
    end
  end
  return t
end

-- -- Stream-stream -----------------------------------------------------------------------
-- As Kafka Streams 4.4 has it. Each side keeps its records in a window store (key, time,
-- offset); a record at t joins the other side's records in [t - before, t + after] that
-- the other store still holds: not older than its newest time - (before + after + grace)
-- + 1 (a store's retention, by the largest time put into it). A pair's result carries the
-- later of the two times. No record is dropped as late: one whose window is past finds
-- what the other store still holds. left_join / outer_join: a record that found no partner
-- comes out with nil at once when t + after is already below the stream time; else it
-- waits in the join's outer store (time first) until a partner takes it out, or until the
-- stream time passes its t + lookback + grace (lookback: after for a left record, before
-- for a right one), looked at whenever a record brings the stream time to its own time.
-- The task's stream time is both sides' (one task reads both).

local function side(p)
  -- p: b, proc, kind, mine, other, outer (store names or nil), before, after
  -- (as seen from this side), grace, kser, vser (mine), oser (other's),
  -- my_tag, other_tag, buffer_me, buffer_other, left, joiner, state, where
  local joiner, left = p.joiner, p.left
  local before, after, grace = p.before, p.after, p.grace
  local span = p.before + p.after + grace -- a window store's retention
  local ks, kd = p.kser.serialize, p.kser.deserialize
  local vs, vd, od = p.vser.serialize, p.vser.deserialize, p.oser.deserialize
  local kw = string_format("%s (%s): key: ", p.kind, p.where)
  local vw = string_format("%s (%s): value: ", p.kind, p.where)
  local my_tag, other_tag = p.my_tag, p.other_tag
  -- how long past its time a stored unpaired record of each side may still find a partner
  local lookback = { [my_tag] = after, [other_tag] = before }
  local buffer_me, buffer_other, has_outer = p.buffer_me, p.buffer_other, p.outer ~= nil
  local state, seq = p.state, 0

  -- A result at time ts: a pair's is the later of its two records' (Kafka Streams'), an
  -- unpaired record's its own.
  local function emit(ctx, ts, k, mv, ov)
    if left then
      ctx:forward_at(ts, k, joiner(mv, ov, k))
    else
      ctx:forward_at(ts, k, joiner(ov, mv, k))
    end
  end

  -- The task's shared state: the newest time put into each side's store (0 after a restart:
  -- not known until records come), and a lower bound of the outer store's times.
  local function shared(ctx)
    local id = ctx:task_id()
    local sh = state[id]
    if not sh then
      sh = { min = 0, newest = { L = -1, R = -1 } }
      state[id] = sh
    end
    return sh
  end

  -- Emits, in time order, the outer store's records that no partner can take any more.
  local function flush_outer(ctx, sh, now)
    if sh.min + after + grace >= now then return end
    local out, n = {}, 0
    local open = {}
    sh.min = math.huge
    local it = ctx.outer:range(be64(0), nil)
    for bk, raw in it do
      local t, tag = dec64(bk, 1), sub(bk, 9, 9)
      sh.min = t -- (the bound Kafka Streams keeps: the last record looked at)
      if open[my_tag] and open[other_tag] then
        it:close()
        break
      end
      if t + lookback[tag] + grace >= now then
        open[tag] = true
      else
        out[n + 1], out[n + 2] = bk, raw
        n = n + 2
      end
    end
    for i = 1, n, 2 do
      local bk, raw = out[i], out[i + 1]
      local len = window.dec32(bk, 10)
      local k, t = kd(sub(bk, 14, 13 + len), kw), dec64(bk, 1)
      if sub(bk, 9, 9) == my_tag then
        emit(ctx, t, k, vd(raw, vw), nil)
      else
        emit(ctx, t, k, nil, od(raw, vw))
      end
      ctx.outer:delete(bk)
    end
  end

  return {
    init = function(ctx)
      ctx.mine, ctx.other = ctx:store(p.mine), ctx:store(p.other)
      if has_outer then ctx.outer = ctx:store(p.outer) end
      -- what no fetch can see any more goes: older than this store's newest time - span
      ctx:schedule(math.max(1, math.floor(span / 2)), function(c)
        local newest = shared(c).newest[my_tag]
        if newest >= 0 then window.expire(c.mine, newest - span + 1) end
      end, "stream")
    end,
    process = function(ctx, k, v)
      -- (a record without a value joins nothing, and moves no store's time: Kafka Streams'
      -- join stores keep duplicates, and skip the put of a null value)
      if k == nil or v == nil then return end
      local ts = ctx:timestamp()
      if ts < 0 then
        window.late(p.b, ctx, p.proc, ts, ctx:stream_time(), "it has no timestamp")
        return
      end
      local now = ctx:stream_time()
      if ts > now then now = ts end
      local sh = shared(ctx)
      if has_outer and ts == now then flush_outer(ctx, sh, now) end
      local pk = prefix(ks(k, kw))
      local plen = #pk
      local off = ctx:offset()
      if off == nil then
        seq = seq + 1
        off = seq
      end
      local t8, s8 = be64(ts), be64(off)
      if ts > sh.newest[my_tag] - span then -- (else the store would hold it for nobody)
        ctx.mine:put(pk .. t8 .. s8, vs(v, vw))
        ctx.mine:put(index(pk, t8, s8), "")
      end
      if ts > sh.newest[my_tag] then sh.newest[my_tag] = ts end
      local lo = ts - before
      local held = sh.newest[other_tag] - span + 1
      if held > lo then lo = held end
      if lo < 0 then lo = 0 end
      local found, n = nil, 0
      if lo <= ts + after then
        for ok, raw in ctx.other:range(pk .. be64(lo), pk .. be64(ts + after + 1)) do
          found = found or {}
          found[n + 1], found[n + 2] = ok, raw
          n = n + 2
        end
      end
      for i = 1, n, 2 do
        local ok = found[i]
        local ots = dec64(ok, plen + 1)
        if buffer_other then
          local bk = sub(ok, plen + 1, plen + 8) .. other_tag .. pk .. sub(ok, plen + 9)
          if ctx.outer:get(bk) ~= nil then ctx.outer:delete(bk) end
        end
        emit(ctx, ots > ts and ots or ts, k, v, od(found[i + 1], vw))
      end
      if n == 0 and buffer_me then
        if ts + after < now then
          emit(ctx, ts, k, v, nil) -- its window is past already: no partner can come
        else
          ctx.outer:put(t8 .. my_tag .. pk .. s8, vs(v, vw))
          if ts < sh.min then sh.min = ts end
        end
      end
    end,
  }
end

local function stream_stream(l, r, joiner, spec, opts, kind, where)
  if type(spec) == "number" then spec = window.join_window(spec) end
  if not window.is_spec(spec) or spec.kind ~= "join" then
    fail("%s of two streams: expected a window, join_window(before [, after]) from beck.dsl " ..
         "or a number of ms", kind)
  end
  local b = l.b
  local name = b:name(kind, opts.name)
  local lin, rin = l.node, r.node
  if l.key_changed then
    lin = b:repartition(l.node, name .. "-left", l.kser, l.vser, where, { drop_nil_keys = true })
  end
  if r.key_changed then
    rin = b:repartition(r.node, name .. "-right", l.kser, r.vser, where, { drop_nil_keys = true })
  end
  local this_store = b:derived((opts.store or name) .. "-this-store")
  local other_store = b:derived((opts.store or name) .. "-other-store")
  local outer_store = nil
  if kind ~= "join" then outer_store = b:derived((opts.store or name) .. "-outer-store") end
  local lp, rp = b:derived(name .. "-this"), b:derived(name .. "-other")
  local state = {} -- task id -> the two sides' shared state (side(): shared)
  local lser = b:serde(opts.value_serde, l.vser, kind .. ": value_serde")
  local rser = b:serde(opts.other_value_serde, r.vser, kind .. ": other_value_serde")
  local common = { b = b, kind = kind, joiner = joiner, grace = spec.grace_ms, kser = l.kser,
                   outer = outer_store, state = state, where = where }
  local function with(t)
    for k, v in pairs(common) do t[k] = v end
    return t
  end
  b:processor(lp, kind, side(with {
    proc = lp, mine = this_store, other = other_store, before = spec.before, after = spec.after,
    vser = lser, oser = rser, my_tag = "L", other_tag = "R", left = true,
    buffer_me = kind ~= "join", buffer_other = kind == "outer_join",
  }), { lin }, where)
  b:processor(rp, kind, side(with {
    proc = rp, mine = other_store, other = this_store, before = spec.after, after = spec.before,
    vser = rser, oser = lser, my_tag = "R", other_tag = "L", left = false,
    buffer_me = kind == "outer_join", buffer_other = kind ~= "join",
  }), { rin }, where)
  -- window-store keys ([length][key][time]...): one group per record key
  local changelog = { changelog = opts.changelog, kind = "window" }
  b:store(this_store, changelog, lp, kind, where)
  b:use_store(this_store, rp)
  b:store(other_store, changelog, rp, kind, where)
  b:use_store(other_store, lp)
  if outer_store then
    b:store(outer_store, changelog, lp, kind, where)
    b:use_store(outer_store, rp)
  end
  b:processor(name, kind, builder.PASS, { lp, rp }, where)
  return stream_mod.new(b, name, l.kser, b:serde(opts.result_serde, nil, kind .. ": result_serde"),
                        false)
end

-- -- Entry points -------------------------------------------------------------------------

function M.stream_join(s, other, joiner, a, c, kind)
  local global = builder.module("global")
  if global.is_global(other) then
    if kind == "outer_join" then fail("outer_join: a stream joins a global table with join or left_join") end
    -- join(global, key_selector, joiner [, opts])
    return global.join(s, other, joiner, a, c, kind)
  end
  check_fn(joiner, kind .. ": joiner")
  local where = builder.site()
  if table_mod.is_table(other) then
    return stream_table(s, other, joiner, check_opts(a, kind), kind, where)
  end
  if not stream_mod.is_stream(other) then
    fail("%s: expected a table or a stream to join, got %s", kind, type(other))
  end
  return stream_stream(s, other, joiner, a, check_opts(c, kind), kind, where)
end

function M.table_join(t, other, joiner, opts, kind, fk_opts)
  local where = builder.site()
  if type(opts) == "function" then
    -- join(other, fk_extractor, joiner [, opts]): a foreign-key join
    if not table_mod.is_table(other) then
      fail("%s: a table joins a table by foreign key, got %s", kind, type(other))
    end
    return builder.module("fkjoin").fk_join(t, other, joiner, opts, check_opts(fk_opts, kind),
                                            kind, where)
  end
  check_fn(joiner, kind .. ": joiner")
  if not table_mod.is_table(other) then
    fail("%s: a table joins a table (stream:join(table) for a stream), got %s", kind, type(other))
  end
  return table_table(t, other, joiner, check_opts(opts, kind), kind, where)
end

builder.provide("join", M)

return M
