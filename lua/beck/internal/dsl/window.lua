-- beck.internal.dsl.window: windows (tumbling, hopping, session, join) and window
-- stores on top of the key-value store API.
--
-- A window store key is [4-byte big-endian length][record key][8-byte
-- big-endian time][rest]: the record key comes first, so one key's windows
-- are one range scan and state stays split by record key; time is the
-- window start (time windows), the session end then its start (sessions),
-- or the record time then a sequence number (joins). Retention: each entry
-- has an index entry [ff ff ff ff][time][length][key][rest] (no key has
-- length 2^32-1), so expiry is one scan of the index up to the cutoff, on a
-- stream-time punctuation. A time window's index entry holds the time of its
-- newest record (8 bytes big-endian), the timestamp of its results.
local builder = require "beck.internal.dsl.builder"
local layout = require "beck.internal.layout"
local serde = require "beck.serde"
builder.internal()

local sub = string.sub
local floor, type, setmetatable, getmetatable = math.floor, type, setmetatable, getmetatable
local string_format = string.format
local windowed_key, session_key = serde.windowed, serde.session
local fail, check_opts = builder.fail, builder.check_opts

local M = {}

-- -- Window specs ------------------------------------------------------------------

local Spec = {}
Spec.__index = Spec

local function ms(x, what, min)
  if type(x) ~= "number" or x ~= floor(x) or x < (min or 1) then
    fail("%s: expected a whole number of ms >= %d, got %s", what, min or 1, tostring(x))
  end
  return x
end

-- tumbling(size): back-to-back windows [n·size, (n+1)·size).
function M.tumbling(size)
  ms(size, "tumbling")
  return setmetatable({ kind = "time", size = size, advance = size, grace_ms = 0 }, Spec)
end

-- hopping(size, advance): windows of `size` starting every `advance` ms.
function M.hopping(size, advance)
  ms(size, "hopping: size")
  ms(advance, "hopping: advance")
  if advance > size then fail("hopping: the advance (%d) is larger than the size (%d)", advance,
                              size) end
  return setmetatable({ kind = "time", size = size, advance = advance, grace_ms = 0 }, Spec)
end

-- session(gap): records of a key less than `gap` ms apart share a session.
function M.session(gap)
  ms(gap, "session")
  return setmetatable({ kind = "session", gap = gap, grace_ms = 0 }, Spec)
end

-- sliding(time_difference): Kafka Streams' SlidingWindows (KIP-450): windows of
-- time_difference + 1 ms, bounds included, that slide with the records: each record has
-- the window ending at its time, and the window just after it when a later record falls
-- in it; only windows that hold records exist.
function M.sliding(td)
  ms(td, "sliding")
  return setmetatable({ kind = "sliding", size = td, grace_ms = 0 }, Spec)
end

-- join_window(before [, after]): a record joins the other side's records
-- from `before` ms earlier to `after` (default: before) ms later.
function M.join_window(before, after)
  ms(before, "join_window: before", 0)
  ms(after or before, "join_window: after", 0)
  return setmetatable({ kind = "join", before = before, after = after or before, grace_ms = 0 },
                      Spec)
end

local function copy(s, k, v)
  local c = {}
  for kk, vv in pairs(s) do c[kk] = vv end
  c[k] = v
  return setmetatable(c, Spec)
end

-- :grace(ms): how long after its end a window still takes late records
-- (default 0).
function Spec:grace(g)
  return copy(self, "grace_ms", ms(g, "grace", 0))
end

function M.is_spec(x)
  return getmetatable(x) == Spec
end

-- -- Keys (beck.internal.layout) ----------------------------------------------------

local IDX, TOP = layout.IDX, layout.TOP
local be32, be64, dec32, dec64 = layout.be32, layout.be64, layout.dec32, layout.dec64
local prefix, index, entry_of = layout.prefix, layout.index, layout.entry_of
M.IDX, M.TOP = IDX, TOP
M.be32, M.be64, M.dec32, M.dec64 = be32, be64, dec32, dec64
M.prefix, M.index, M.entry_of, M.expire = prefix, index, entry_of, layout.expire

-- key(k, t [, t2]) -> the store key of a window of the serialized key k.
function M.key(k, t, t2)
  return prefix(k) .. be64(t) .. (t2 and be64(t2) or "")
end

-- parse(store key) -> serialized key, time, second time (or nil); nil for
-- an index entry.
function M.parse(sk)
  if sub(sk, 1, 4) == IDX then return nil end
  local n = dec32(sk, 1)
  local t2 = nil
  if #sk >= 4 + n + 16 then t2 = dec64(sk, 4 + n + 9) end
  return sub(sk, 5, 4 + n), dec64(sk, 4 + n + 1), t2
end

-- Schedules expiry every half retention of stream time (at least 1 ms).
function M.schedule_expiry(ctx, st, retention)
  ctx:schedule(math.max(1, floor(retention / 2)), function(_, now)
    M.expire(st, now - retention)
  end, "stream")
end

-- late(b, ctx, proc, ts, now, what [, store]): counts a late record (by processor for
-- dsl.stats, by task and store for /metrics) and logs the first and every 10^n-th of a
-- processor.
function M.late(b, ctx, proc, ts, now, what, store)
  local n = b:dropped(proc, 1)
  if store then ctx:_late(store, 1) end
  local p = 1
  while p < n do p = p * 10 end
  if p == n then
    ctx:log("warn", "dropped a late record (timestamp %d, %s, stream time %d); %d dropped so far",
            ts, what, now, n)
  end
end
local late = M.late

-- -- Emit final (Kafka Streams' EmitStrategy.onWindowClose, KIP-825) -----------------
-- One result per window, once stream time closes it: after each record, every window of
-- the store that closed since the last emission goes out (Kafka Streams throttles this
-- check to once a second of wall-clock time, an internal setting; beck makes it at every
-- record, as Kafka Streams does with that setting at 0). The close time of the last
-- emission is not stored: it is the task's stream time less the grace (and a session's
-- gap), as committed with its input offsets (a window that closed before a commit was
-- emitted in it), so a restart or another node emits nothing twice and loses nothing.

-- emit_closed(st, kd, kw, lo, hi, emit_one): calls emit_one(record key, index time, second
-- time or nil, value bytes, index entry's value) for each window whose index time is in [lo, hi] (a window's
-- start, a session's end), in index order. Keys are gathered first: a store takes no writes
-- while an iterator on it is open, and what a forward reaches may write.
local function emit_closed(st, kd, kw, lo, hi, emit_one)
  if hi < lo then return end
  local keys, vals, n = {}, {}, 0
  for ik, iv in st:range(IDX .. be64(lo), IDX .. be64(hi + 1)) do
    n = n + 1
    keys[n], vals[n] = ik, iv
  end
  for i = 1, n do
    local ik = keys[i]
    local wk, len = entry_of(ik)
    local sk = sub(ik, 17, 16 + len)
    local raw = st:get(wk)
    if raw ~= nil then
      emit_one(kd(sk, kw), dec64(ik, 5), #ik > 16 + len and dec64(ik, 17 + len) or nil, raw,
               vals[i])
    end
  end
end

-- The close time of the last emission a task made before it was opened here, -1 none:
-- its stream time at its last commit less shift, if a window had closed by then (its
-- newest start at least 0: close - min >= 0).
local function last_close(ctx, shift, min)
  local t = ctx:stream_time()
  return t >= 0 and t - shift - min >= 0 and t - shift or -1
end

-- A time window's time (its newest record's) from its index entry's value; `default` for
-- an entry without one (written before windows kept it).
local function window_time(iv, default)
  if iv ~= nil and #iv == 8 then return dec64(iv, 1) end
  return default
end

local function check_emit(opts, op)
  local e = opts.emit
  if e == nil or e == "update" then return false end
  if e == "final" then return true end
  fail("%s: emit must be \"update\" (every change, the default) or \"final\" (one " ..
       "result per window, once it closes), got %s", op, tostring(e))
end

-- -- Windowed aggregations -----------------------------------------------------------

local Windowed = {}
Windowed.__index = Windowed

-- grouped:windowed_by(spec)
function M.windowed(g, spec)
  if not M.is_spec(spec) or spec.kind == "join" then
    fail("windowed_by: expected tumbling(size), hopping(size, advance), sliding(difference) " ..
         "or session(gap) from beck.dsl")
  end
  return setmetatable({ g = g, spec = spec }, Windowed)
end

-- A time window is needed until it closes: size + grace after its start. A
-- session for gap + grace after its end, as Kafka Streams keeps it: a record
-- merges only the sessions its store still holds (session_def).
local function retention_of(spec, opts, op)
  -- a sliding window's record may need the windows up to twice the difference before it
  local min = spec.kind == "time" and spec.size + spec.grace_ms
              or spec.kind == "sliding" and 2 * spec.size + spec.grace_ms
              or spec.gap + spec.grace_ms
  local r = opts.retention
  if r == nil then return min end
  ms(r, op .. ": retention")
  if r < min then
    fail("%s: retention (%d ms) is shorter than the window and its grace (%d ms)", op, r, min)
  end
  return r
end

-- The processor of an aggregation over time windows.
local function time_def(b, proc, store, g, desc, spec, retention, where, final)
  local size, advance, grace = spec.size, spec.advance, spec.grace_ms
  local ks, vs, vd = g.kser.serialize, desc.vser.serialize, desc.vser.deserialize
  local kd = g.kser.deserialize
  local kw = string_format("%s (%s): store %s: key: ", desc.op, where, store)
  local vw = string_format("%s (%s): store %s: value: ", desc.op, where, store)
  local init, add = desc.init, desc.add
  -- emit final: the windows that closed, by start: [last close - size + 1, close - size]
  local function emit_final(ctx, now)
    local close = now - grace
    local last = ctx.last_close
    if last >= 0 and last >= close then return end
    local lo = last < 0 and 0 or math.max(0, last - size) + 1
    local hi = close - size
    -- no window starts in [lo, hi] (a multiple of advance): nothing closed since
    if hi < 0 or lo + (advance - lo % advance) % advance > hi then return end
    ctx.last_close = close
    emit_closed(ctx.st, kd, kw, lo, hi, function(k, s, _, raw, iv)
      ctx:forward_at(window_time(iv, s + size - 1), windowed_key(k, s, s + size), vd(raw, vw))
    end)
  end
  return {
    init = function(ctx)
      ctx.st = ctx:store(store)
      ctx.last_close = last_close(ctx, grace, size)
      M.schedule_expiry(ctx, ctx.st, retention)
    end,
    process = function(ctx, k, v)
      local ts = ctx:timestamp()
      -- no key, no value or no time (< 0): no window, as in Kafka Streams
      if k == nil or v == nil or ts < 0 then return end
      local now = ctx:stream_time()
      if ts > now then now = ts end
      local st = ctx.st
      local p = prefix(ks(k, kw))
      -- windows [s, s + size) with s a multiple of advance, s <= ts < s + size
      local last = ts - ts % advance
      local first = last
      while first - advance > ts - size and first - advance >= 0 do first = first - advance end
      for s = first, last, advance do
        local e = s + size
        if e + grace <= now then
          late(b, ctx, proc, ts, now, string_format("window [%d, %d) closed", s, e), store)
        else
          local t8 = be64(s)
          local wk, ik = p .. t8, index(p, t8, "")
          local raw = st:get(wk)
          local agg, wts
          if raw ~= nil then
            agg = vd(raw, vw)
            wts = window_time(st:get(ik), ts)
          elseif init ~= nil then
            agg = init()
          end
          agg = add(k, v, agg)
          if agg == nil then st:delete(wk) else st:put(wk, vs(agg, vw)) end
          -- the window's time: its newest record's, as Kafka Streams stamps an aggregate
          if wts == nil or ts > wts then
            wts = ts
            st:put(ik, be64(ts))
          end
          if not final then ctx:forward_at(wts, windowed_key(k, s, e), agg) end
        end
      end
      if final then emit_final(ctx, now) end
    end,
  }
end

-- The processor of an aggregation over sliding windows, as Kafka Streams 4.4 has it
-- (KStreamSlidingWindowAggregate, its reverse-iterating path): a record at time t updates
-- every window of its key that holds t, makes its own left window [t - d, t] (from the
-- aggregate of the window just before, when the record before falls in it), its right
-- window [t + 1, t + 1 + d] when a later record falls there, and the right window of the
-- record before it when that one lacks it. A window's time (its newest record's) lives in
-- its index entry. As in Kafka Streams' store, a fetch sees only windows starting after
-- the store's newest start less the retention (ctx.observed: found again at init from the
-- index's newest entries, which start at most d before the stream time).
local function sliding_def(b, proc, store, g, desc, spec, retention, where, final)
  local td, grace = spec.size, spec.grace_ms
  local ks, vs, vd = g.kser.serialize, desc.vser.serialize, desc.vser.deserialize
  local kd = g.kser.deserialize
  local kw = string_format("%s (%s): store %s: key: ", desc.op, where, store)
  local vw = string_format("%s (%s): store %s: value: ", desc.op, where, store)
  local init, add = desc.init, desc.add
  local function initial()
    if init ~= nil then return init() end
    return nil
  end

  -- the windows of key prefix p starting in [lo, hi] that the store shows, by start
  local function fetch(ctx, p, lo, hi)
    local st, list = ctx.st, {}
    if ctx.observed >= 0 then lo = math.max(lo, ctx.observed - retention + 1) end
    if hi < lo then return list end
    for wk, raw in st:range(p .. be64(lo), p .. be64(hi)) do
      list[#list + 1] = { s = dec64(wk, #p + 1), raw = raw }
    end
    for i = 1, #list do
      local w = list[i]
      w.agg = vd(w.raw, vw)
      w.ts = window_time(st:get(index(p, be64(w.s), "")), w.s + td)
    end
    return list
  end

  local function write(ctx, p, s, agg, ts)
    local st, t8 = ctx.st, be64(s)
    if agg == nil then st:delete(p .. t8) else st:put(p .. t8, vs(agg, vw)) end
    st:put(index(p, t8, ""), be64(ts))
    if s > ctx.observed then ctx.observed = s end
  end

  -- window [s, s + td] holding (old, old_ts) takes the record (k, v, ts), unless closed
  local function update(ctx, k, v, ts, p, s, old, old_ts, close)
    local e = s + td
    if e < close then return end -- closed: the record is not added to it (logged by KS)
    local agg = add(k, v, old)
    local nts = old == nil and ts or math.max(ts, old_ts)
    write(ctx, p, s, agg, nts)
    if not final then ctx:forward_at(nts, windowed_key(k, s, e), agg) end
  end

  local function right_window(ctx, k, p, ts, agg, agg_ts)
    write(ctx, p, ts + 1, agg, agg_ts)
    if not final then ctx:forward_at(agg_ts, windowed_key(k, ts + 1, ts + 1 + td), agg) end
  end

  local function create(ctx, k, v, ts, p, close, starts, left, left_created, right,
                        right_created, prev)
    if prev ~= nil and not starts[prev + 1] and prev + 1 + td >= ts then
      update(ctx, k, v, ts, p, prev + 1, initial(), ts, close) -- the record before's right
    end
    if not left_created then
      if prev ~= nil and ts - td <= prev then
        update(ctx, k, v, ts, p, ts - td, left.agg, ts, close)
      else
        update(ctx, k, v, ts, p, ts - td, initial(), ts, close)
      end
    end
    if not right_created and right ~= nil and right.ts > ts then
      right_window(ctx, k, p, ts, right.agg, right.ts)
    end
  end

  -- a record at t >= td
  local function slide(ctx, k, v, ts, p, close)
    local wins = fetch(ctx, p, math.max(0, ts - 2 * td), ts + 1)
    local starts, left, right, prev = {}, nil, nil, nil
    local left_created, right_created = false, false
    for i = #wins, 1, -1 do
      local w = wins[i]
      starts[w.s] = true
      local e = w.s + td
      if w.s == ts + 1 then
        right_created = true
      elseif e > ts then
        right = right or w
        update(ctx, k, v, ts, p, w.s, w.agg, w.ts, close)
      elseif e == ts then
        left_created = true
        update(ctx, k, v, ts, p, w.s, w.agg, w.ts, close)
        if w.ts < ts then prev = w.ts else return end
      else
        left, prev = w, w.ts
        break
      end
    end
    create(ctx, k, v, ts, p, close, starts, left, left_created, right, right_created, prev)
  end

  -- a record at 0 <= t < td: its left window would start before 0, so the window [0, td]
  -- holds every such record (Kafka Streams' processEarly)
  local function early(ctx, k, v, ts, p, close)
    local wins = fetch(ctx, p, 0, ts + 1)
    local starts, combined, right, prev, right_created = {}, nil, nil, nil, false
    for i = 1, #wins do
      local w = wins[i]
      starts[w.s] = true
      if w.s == 0 then
        combined = w
        if w.ts < ts then prev = w.ts end
      elseif w.s <= ts then
        right = w
        update(ctx, k, v, ts, p, w.s, w.agg, w.ts, close)
      elseif w.s == ts + 1 then
        right_created = true
      end
    end
    if right == nil and combined ~= nil and combined.ts > ts then right = combined end
    if not right_created and right ~= nil and right.ts > ts then
      right_window(ctx, k, p, ts, right.agg, right.ts)
    end
    if prev ~= nil and not starts[prev + 1] then
      update(ctx, k, v, ts, p, prev + 1, initial(), ts, close)
    end
    if combined == nil then
      update(ctx, k, v, ts, p, 0, initial(), ts, close)
    else
      update(ctx, k, v, ts, p, 0, combined.agg, combined.ts, close)
    end
  end

  -- emit final: windows whose end fell below close since the last emission
  local function emit_final(ctx, now)
    local close = now - grace
    local last = ctx.last_close
    if last >= 0 and last >= close then return end
    local lo = last < 0 and 0 or math.max(0, last - td)
    local hi = close - td - 1
    if hi < lo then return end
    ctx.last_close = close
    emit_closed(ctx.st, kd, kw, lo, hi, function(k, s, _, raw, iv)
      ctx:forward_at(window_time(iv, s + td), windowed_key(k, s, s + td), vd(raw, vw))
    end)
  end

  return {
    init = function(ctx)
      ctx.st = ctx:store(store)
      ctx.last_close = last_close(ctx, grace, td + 1)
      -- the newest start in the store: at most td before the stream time
      ctx.observed = -1
      local from = math.max(0, ctx:stream_time() - td)
      for ik in ctx.st:range(IDX .. be64(from), IDX .. TOP) do
        local t = dec64(ik, 5)
        if t > ctx.observed then ctx.observed = t end
      end
      -- a window a fetch may still see starts after observed - retention, observed at
      -- most the stream time less td: kept td longer than the retention
      M.schedule_expiry(ctx, ctx.st, retention + td)
    end,
    process = function(ctx, k, v)
      local ts = ctx:timestamp()
      if k == nil or v == nil or ts < 0 then return end
      local now = ctx:stream_time()
      if ts > now then now = ts end
      local close = now - grace
      if ts + td < close then
        late(b, ctx, proc, ts, now, string_format("window [%d, %d] closed", ts, ts + td), store)
        return
      end
      local p = prefix(ks(k, kw))
      if ts < td then early(ctx, k, v, ts, p, close) else slide(ctx, k, v, ts, p, close) end
      if final then emit_final(ctx, now) end
    end,
  }
end

-- The processor of an aggregation over sessions, as Kafka Streams 4.4 has it
-- (KStreamSessionWindowAggregate): a record merges every session of its key
-- that ends at most `gap` before it or starts at most `gap` after it, among
-- those the store still holds (ending after stream time - retention); the
-- merged session is late once its end is before stream time - grace - gap.
-- When the merged session is not the record's own [ts, ts], every session it
-- merged (also one it merely grew) is forwarded as a deletion, then the merged
-- one; each carries its session's end as timestamp.
local function session_def(b, proc, store, g, desc, spec, retention, where, final)
  local gap, grace = spec.gap, spec.grace_ms
  local ks, vs, vd = g.kser.serialize, desc.vser.serialize, desc.vser.deserialize
  local kd = g.kser.deserialize
  local kw = string_format("%s (%s): store %s: key: ", desc.op, where, store)
  local vw = string_format("%s (%s): store %s: value: ", desc.op, where, store)
  local init, add, merge = desc.init, desc.add, desc.merge
  -- emit final: the sessions that closed, by end: [last close, close - 1], each at its end
  local function emit_final(ctx, now)
    local close = now - grace - gap
    local last = ctx.last_close
    if last >= 0 and last >= close then return end
    local lo, hi = math.max(0, last), close - 1
    if hi < lo then return end
    ctx.last_close = close
    emit_closed(ctx.st, kd, kw, lo, hi, function(k, e, s, raw)
      ctx:forward_at(e, session_key(k, s, e), vd(raw, vw))
    end)
  end
  return {
    init = function(ctx)
      ctx.st = ctx:store(store)
      ctx.last_close = last_close(ctx, grace + gap, 1)
      M.schedule_expiry(ctx, ctx.st, retention)
    end,
    process = function(ctx, k, v)
      local ts = ctx:timestamp()
      -- no key, no value or no time (< 0): no window, as in Kafka Streams
      if k == nil or v == nil or ts < 0 then return end
      local before = ctx:stream_time()
      local now = ts > before and ts or before
      local st = ctx.st
      local p = prefix(ks(k, kw))
      local plen = #p
      local lo = ts - gap
      -- what the store holds: not what expired (Kafka Streams' fetch skips it too)
      if lo < before - retention + 1 then lo = before - retention + 1 end
      if lo < 0 then lo = 0 end
      -- sessions [s, e] of the key with e >= ts - gap and s <= ts + gap
      local found, n, ms_, me = nil, 0, ts, ts
      for wk, raw in st:range(p .. be64(lo), p .. TOP) do
        local s = dec64(wk, plen + 9)
        if s <= ts + gap then
          local e = dec64(wk, plen + 1)
          found = found or {}
          found[n + 1], found[n + 2], found[n + 3], found[n + 4] = wk, s, e, raw
          n = n + 4
          if s < ms_ then ms_ = s end
          if e > me then me = e end
        end
      end
      if me + grace + gap < now then
        late(b, ctx, proc, ts, now, string_format("session [%d, %d] closed", ms_, me), store)
        if final then emit_final(ctx, now) end
        return
      end
      local agg = nil
      if init ~= nil then agg = init() end
      local grown = ms_ ~= ts or me ~= ts
      for i = 1, n, 4 do
        local wk, s, e = found[i], found[i + 1], found[i + 2]
        agg = merge(k, agg, vd(found[i + 3], vw))
        if grown then
          if s ~= ms_ or e ~= me then
            st:delete(wk)
            st:delete(index(p, sub(wk, plen + 1, plen + 8), sub(wk, plen + 9)))
          end
          if not final then ctx:forward_at(e, session_key(k, s, e), nil) end
        end
      end
      agg = add(k, v, agg)
      local e8, s8 = be64(me), be64(ms_)
      st:put(p .. e8 .. s8, vs(agg, vw))
      st:put(index(p, e8, s8), "")
      if final then
        emit_final(ctx, now)
      else
        ctx:forward_at(me, session_key(k, ms_, me), agg)
      end
    end,
  }
end

local function windowed_aggregate(w, desc, opts)
  local g, spec = w.g, w.spec
  local b = g.b
  local where = builder.site()
  if spec.kind == "session" and desc.merge == nil then
    fail("%s over sessions: give opts.merger(k, agg1, agg2) -> agg to merge two sessions",
         desc.op)
  end
  local retention = retention_of(spec, opts, desc.op)
  local proc = b:name(desc.op, opts.name)
  local input = builder.module("aggregate").input(g, proc, opts.store)
  local store = opts.store or b:derived(proc .. "-store")
  local def = spec.kind == "time" and time_def or spec.kind == "sliding" and sliding_def
              or session_def
  local final = check_emit(opts, desc.op)
  b:processor(proc, desc.op, def(b, proc, store, g, desc, spec, retention, where, final),
              { input }, where)
  b:store(store, { changelog = opts.changelog, kind = "window", retention = retention,
                   key_serde = g.kser.name, value_serde = desc.vser.name }, proc, desc.op, where)
  local t = builder.module("table").materialized(b, proc, store, g.kser, desc.vser, true)
  t.getter = nil -- a windowed table is not looked up by key (no joins)
  -- how long after its end a window may still change: suppress's wait for its close (a
  -- session's end moves on with a record up to gap later, as Kafka Streams counts it)
  t.grace = spec.kind == "session" and spec.grace_ms + spec.gap or spec.grace_ms
  return t
end

-- aggregate_with(w, desc, opts): a windowed aggregation that a description says
-- (beck.internal.dsl.cogroup's).
M.aggregate_with = windowed_aggregate

-- count / reduce / aggregate over windows: as on a grouping (beck.dsl.
-- aggregate), keyed by { key =, start =, ["end"] = } (serde.windowed).
-- opts.retention: how long windows stay in the store (default: size +
-- grace; for sessions gap + grace, as in Kafka Streams).
function Windowed:count(opts)
  local agg = builder.module("aggregate")
  return windowed_aggregate(self, agg.count_desc(), check_opts(opts, "count"))
end

function Windowed:reduce(fn, opts)
  local agg = builder.module("aggregate")
  opts = check_opts(opts, "reduce")
  return windowed_aggregate(self, agg.reduce_desc(self.g, fn, opts), opts)
end

function Windowed:aggregate(init, adder, opts)
  local agg = builder.module("aggregate")
  opts = check_opts(opts, "aggregate")
  return windowed_aggregate(self, agg.aggregate_desc(self.g, init, adder, opts), opts)
end

builder.provide("window", M)

return M
