-- beck.internal.dsl.suppress: table:suppress(opts), Kafka Streams' KTable#suppress. A
-- table's updates wait in a buffer; each key's latest one goes on when its time comes:
--
--   until = "window_close": a windowed table's update once stream time passes its window's
--     end + grace (Suppressed.untilWindowCloses): one final result per window; a deletion
--     is not forwarded.
--   until = "time_limit", time_limit_ms = d: a key's latest update d ms of stream time after
--     the first one it buffered (Suppressed.untilTimeLimit); deletions are forwarded.
--     max_records / max_bytes bound the buffer, and when_full says what a full one does:
--     "emit_early" (the default: the oldest go on at once) or "shut_down" (the task fails).
--
-- Stream time here is the largest timestamp of the updates that reached the suppression,
-- as in Kafka Streams; a key keeps the time of its first buffered update (its place in the
-- queue), and goes on with its latest value and that value's timestamp.
--
-- The buffer is a changelogged window-layout store, `<name>-buffer`: one entry per key,
-- [length][buffer key][8-byte time] -> [8-byte timestamp][flag][value], with the window
-- index ([ff ff ff ff][time][length][buffer key]) giving the keys in time order. Whatever
-- goes on is deleted from it in the same commit, so under exactly-once a crash loses
-- nothing and forwards nothing twice. A buffer key is the record key with its window, if
-- any: [0][key] or [1 time window | 2 session][start][end][key].
local builder = require "beck.internal.dsl.builder"
local serde = require "beck.serde"
local window = require "beck.internal.dsl.window"
builder.internal()

local type, setmetatable, getmetatable, tostring = type, setmetatable, getmetatable, tostring
local byte, char, sub = string.byte, string.char, string.sub
local string_format = string.format
local fail, check_opts = builder.fail, builder.check_opts
local be64, dec64, prefix, IDX, TOP = window.be64, window.dec64, window.prefix, window.IDX,
                                      window.TOP

local M = {}

local function whole(x, what, min)
  if type(x) ~= "number" or x ~= math.floor(x) or x < min then
    fail("suppress: %s must be a whole number >= %d, got %s", what, min, tostring(x))
  end
  return x
end

-- The buffer key of a record key k (kser: the table's key serde, of the record key inside
-- a windowed key), and back.
local function key_codec(kser)
  local ks, kd = kser.serialize, kser.deserialize
  local W, S = serde.Windowed, serde.Session
  local function enc(k, where)
    local mt = getmetatable(k)
    if mt == W or mt == S then
      return char(mt == W and 1 or 2) .. be64(k.start) .. be64(k["end"]) .. ks(k.key, where)
    end
    return "\0" .. ks(k, where)
  end
  local function dec(b, where)
    local kind = byte(b, 1)
    if kind == 0 then return kd(sub(b, 2), where) end
    local k = kd(sub(b, 18), where)
    local mk = kind == 1 and serde.windowed or serde.session
    return mk(k, dec64(b, 2), dec64(b, 10))
  end
  return enc, dec
end

local function parse_opts(t, opts)
  local u = opts["until"]
  local c = { drop_tombstones = false, max_records = math.huge, max_bytes = math.huge,
              when_full = "emit_early" }
  if u == "window_close" then
    if not t.windowed or t.grace == nil then
      fail("suppress: until = \"window_close\" needs a windowed table (a windowed " ..
           "aggregation's)")
    end
    c.wait, c.by_window, c.drop_tombstones = t.grace, true, true
    c.when_full = "shut_down" -- (Kafka Streams: a final result is never emitted early)
  elseif u == "time_limit" then
    c.wait = whole(opts.time_limit_ms, "time_limit_ms", 0)
  else
    fail("suppress: until must be \"window_close\" or \"time_limit\" (with time_limit_ms), " ..
         "got %s", tostring(u))
  end
  if opts.max_records ~= nil then c.max_records = whole(opts.max_records, "max_records", 1) end
  if opts.max_bytes ~= nil then c.max_bytes = whole(opts.max_bytes, "max_bytes", 1) end
  if opts.when_full ~= nil then
    if opts.when_full ~= "emit_early" and opts.when_full ~= "shut_down" then
      fail("suppress: when_full must be \"emit_early\" or \"shut_down\", got %s",
           tostring(opts.when_full))
    end
    if u == "window_close" and opts.when_full == "emit_early" then
      fail("suppress: a final result is never emitted early: with until = " ..
           "\"window_close\", when_full can only be \"shut_down\"")
    end
    c.when_full = opts.when_full
  end
  return c
end

-- table:suppress(opts) -> a table whose updates come out as opts say (above). opts: until,
-- time_limit_ms, max_records, max_bytes, when_full, name, store (the buffer's name).
function M.suppress(t, opts)
  opts = check_opts(opts, "suppress")
  local b = t.b
  local where = builder.site()
  local c = parse_opts(t, opts)
  local name = b:name("suppress", opts.name)
  local store = opts.store or b:derived(name .. "-buffer")
  local enc, dec = key_codec(t.kser)
  local vs, vd = t.vser.serialize, t.vser.deserialize
  local kw = string_format("suppress (%s): buffer %s: key: ", where, store)
  local vw = string_format("suppress (%s): buffer %s: value: ", where, store)

  -- the buffered entry's bytes, for max_bytes: key, value and their times
  local function size(bk, raw) return #bk + #raw + 16 end

  local function emit(ctx, ik)
    local st = ctx.st
    local dk, len = window.entry_of(ik)
    local bk = sub(ik, 17, 16 + len)
    local raw = st:get(dk)
    st:delete(dk)
    st:delete(ik)
    if raw == nil then return end
    ctx.count, ctx.bytes = ctx.count - 1, ctx.bytes - size(bk, raw)
    local has = byte(raw, 9) == 1
    if has or not c.drop_tombstones then
      ctx:forward_at(dec64(raw, 1), dec(bk, kw), has and vd(sub(raw, 10), vw) or nil)
    end
  end

  -- every index entry up to `hi` (a time), in order; or the n oldest
  local function evict(ctx, hi, n)
    local keys, m = {}, 0
    local it = ctx.st:range(IDX .. be64(0), IDX .. (hi and be64(hi + 1) or TOP))
    for ik in it do
      m = m + 1
      keys[m] = ik
      if n and m >= n then break end
    end
    it:close() -- (one left open would refuse the writes below)
    for i = 1, m do emit(ctx, keys[i]) end
  end

  b:processor(name, "suppress", {
    init = function(ctx)
      ctx.st = ctx:store(store)
      ctx.seen = -1 -- (Kafka Streams starts its suppression's stream time afresh too)
      ctx.count, ctx.bytes = 0, 0
      -- the buffer's figures, from what it holds (a restart, a move)
      for ik in ctx.st:range(IDX .. be64(0), IDX .. TOP) do
        local dk, len = window.entry_of(ik)
        local raw = ctx.st:get(dk)
        if raw then
          ctx.count, ctx.bytes = ctx.count + 1, ctx.bytes + size(sub(ik, 17, 16 + len), raw)
        end
      end
    end,
    process = function(ctx, k, v)
      if k == nil then return end
      local ts = ctx:timestamp()
      if ts > ctx.seen then ctx.seen = ts end
      local st = ctx.st
      local bk = enc(k, kw)
      local p = prefix(bk)
      local raw = be64(ts >= 0 and ts or 0) .. (v == nil and "\0" or "\1" .. vs(v, vw))
      -- the key's entry if it has one: it keeps its time (its place in the queue)
      local old_key, old_raw
      for wk, r in st:range(p .. be64(0), p .. TOP) do old_key, old_raw = wk, r end
      if old_key then
        st:put(old_key, raw)
        ctx.bytes = ctx.bytes + #raw - #old_raw
      else
        local time = c.by_window and k["end"] or ts
        local t8 = be64(time >= 0 and time or 0)
        st:put(p .. t8, raw)
        st:put(window.index(p, t8, ""), "")
        ctx.count, ctx.bytes = ctx.count + 1, ctx.bytes + size(bk, raw)
      end
      if ctx.seen - c.wait >= 0 then evict(ctx, ctx.seen - c.wait) end
      if ctx.count > c.max_records or ctx.bytes > c.max_bytes then
        if c.when_full == "shut_down" then
          error(string_format("suppress %s (%s): its buffer is full: %d record(s) of %s, " ..
                              "%d byte(s) of %s (when_full = \"shut_down\")", name, where,
                              ctx.count, tostring(c.max_records), ctx.bytes,
                              tostring(c.max_bytes)), 0)
        end
        while ctx.count > c.max_records or ctx.bytes > c.max_bytes do
          local before = ctx.count
          evict(ctx, nil, 1)
          if ctx.count == before then break end
        end
      end
    end,
  }, { t.node }, where)
  b:store(store, { changelog = opts.changelog, kind = "window" }, name, "suppress", where)
  local out = builder.module("table").materialized(b, name, store, t.kser, t.vser, t.windowed)
  out.getter, out.stores, out.grace = nil, {}, t.grace -- the buffer is not the table's state
  return out
end

builder.provide("suppress", M)

return M
