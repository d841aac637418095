-- The membership view (runtime/cluster/member_view.c) as a pure fold of control records: an
-- observer's view fed records by hand, with their offsets and timestamps, and read back.
-- No Kafka and no clock: log time is the largest record timestamp (docs/cluster.md).
local ffi = require "ffi"
local C = ffi.C

local SESSION = 10000
local ALIVE, DEAD, LEFT, REPLACED = 0, 1, 2, 3

local bufp, lenp = ffi.new("char *[1]"), ffi.new("size_t[1]")
local errp = ffi.new("const char *[1]")

local function take(rc)
  assert(rc == 0, "encoding a record failed")
  local s = ffi.string(bufp[0], lenp[0])
  C.bk_ffi_assigncodec_buf_free(bufp[0])
  return s
end

local rec = {}
function rec.heartbeat(id, inc) return take(C.bk_ffi_member_rec_heartbeat(id, inc, "", 1, 4, 0,
                                                                            SESSION, bufp, lenp)) end
function rec.leave(id, inc) return take(C.bk_ffi_member_rec_leave(id, inc, bufp, lenp)) end
function rec.release(id, inc, epoch, tasks)
  local a = ffi.new("int32_t[?]", #tasks + 1, tasks)
  return take(C.bk_ffi_member_rec_release(id, inc, epoch, a, #tasks, bufp, lenp))
end
function rec.progress(id, inc, tasks, offsets)
  local t = ffi.new("int32_t[?]", #tasks + 1, tasks)
  local o = ffi.new("int64_t[?]", #offsets + 1, offsets)
  return take(C.bk_ffi_member_rec_progress(id, inc, t, o, #tasks, SESSION, bufp, lenp))
end
function rec.drained(id, inc, task)
  return take(C.bk_ffi_member_rec_drained(id, inc, task, bufp, lenp))
end
function rec.generation(id, inc, after, sub, tasks)
  return take(C.bk_ffi_member_rec_generation(id, inc, after, sub, tasks, bufp, lenp))
end
-- An assignment by `id` (incarnation inc): epoch based on base, nodes = { "a", "b" } (slots),
-- owners = { [task] = slot }, 0-based tasks and slots.
function rec.assign(id, inc, epoch, base, nodes, owners, ntasks)
  local ac = ffi.gc(C.bk_ffi_assigncodec_new(#nodes, ntasks, 0, epoch, base),
                    C.bk_ffi_assigncodec_free)
  for slot, node in ipairs(nodes) do
    assert(C.bk_ffi_assigncodec_set_node(ac, slot - 1, node, nil, nil, errp) == 0)
  end
  for t = 0, ntasks - 1 do
    assert(C.bk_ffi_assigncodec_set_task(ac, t, owners[t], nil, 0) == 0)
  end
  local payload = take(C.bk_ffi_assigncodec_encode(ac, bufp, lenp, errp))
  return take(C.bk_ffi_member_rec_assign(id, inc, payload, #payload, bufp, lenp))
end

-- An observer's view; feed(record, ts) applies one record at the next offset.
local View = {}
View.__index = View

local function view()
  local s = assert(C.bk_ffi_member_observer_new(SESSION))
  return setmetatable({ s = ffi.gc(s, C.bk_ffi_member_observer_free), offset = 0 }, View)
end

function View:feed(r, ts)
  assert(C.bk_ffi_member_feed(self.s, r, #r, self.offset, ts) == 0)
  self.offset = self.offset + 1
  return self
end

-- Heartbeats of `id` every `step` ms (1000) from `from` to `to`: a live log, never silent
-- for half a session (a longer silence is not counted toward sessions).
function View:beats(id, inc, from, to, step)
  for ts = from, to, step or 1000 do self:feed(rec.heartbeat(id, inc), ts) end
  return self
end

-- The view's state as a checkpoint holds it (bytes).
function View:state()
  return take(C.bk_ffi_member_state(self.s, bufp, lenp))
end

-- A checkpoint record of this view, written by `id`.
function View:checkpoint(id, inc)
  return take(C.bk_ffi_member_rec_checkpoint(self.s, id, inc, bufp, lenp))
end

-- A fresh view loaded from a checkpoint record; it goes on at the offset after the one the
-- checkpoint describes. nil and the error when it refuses.
local function from_checkpoint(r)
  local v = view()
  local last = ffi.new("int64_t[1]")
  if C.bk_ffi_member_load(v.s, r, #r, last, errp) ~= 0 then
    return nil, ffi.string(errp[0])
  end
  v.offset = tonumber(last[0]) + 1
  return v
end

-- { peers = { id = { state =, inc = } }, alive = "a b", leader = id, epoch =, ntasks =,
--   owner = { [t] = id }, holder = { [t] = id } }
function View:read()
  local np, ld, ep, nt = ffi.new("int32_t[1]"), ffi.new("int32_t[1]"), ffi.new("uint64_t[1]"),
                         ffi.new("int32_t[1]")
  assert(C.bk_ffi_member_view(self.s, np, ld, ep, nt) == 0)
  local st, inc = ffi.new("int32_t[1]"), ffi.new("uint64_t[1]")
  local r = { peers = {}, epoch = tonumber(ep[0]), ntasks = nt[0], owner = {}, holder = {} }
  local ids, alive = {}, {}
  for i = 0, np[0] - 1 do
    local id = ffi.string(C.bk_ffi_member_peer(self.s, i, st, inc))
    ids[i] = id
    r.peers[id] = { state = st[0], inc = tonumber(inc[0]) }
    if st[0] == ALIVE then alive[#alive + 1] = id end
  end
  r.alive = table.concat(alive, " ")
  r.leader = ids[ld[0]]
  local h = ffi.new("int32_t[1]")
  for t = 0, nt[0] - 1 do
    local o = C.bk_ffi_member_task(self.s, t, h)
    r.owner[t], r.holder[t] = ids[o], ids[h[0]]
  end
  return r
end

describe("the membership view", function()
  it("takes the first to join as leader, whatever the ids", function()
    local v = view():feed(rec.heartbeat("zed", 1), 1000):feed(rec.heartbeat("amy", 1), 1100)
    local r = v:read()
    assert.equal("zed amy", r.alive)
    assert.equal("zed", r.leader)
    assert.equal(0, r.epoch)
  end)

  it("ends a silent incarnation one session after its last heartbeat, by log time", function()
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    v:beats("b", 1, 2000, 11000) -- a's last is 10 s old: not past the session yet
    assert.equal(ALIVE, v:read().peers.a.state)
    assert.equal("a", v:read().leader)
    v:feed(rec.heartbeat("b", 1), 11001)
    local r = v:read()
    assert.equal(DEAD, r.peers.a.state)
    assert.equal("b", r.alive)
    assert.equal("b", r.leader)
  end)

  it("does not count a silence of the whole log toward any session (brokers out of reach)",
     function()
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    -- nobody could write for 38.9 s; then a's heartbeat: b is not dead for that
    v:feed(rec.heartbeat("a", 1), 40000)
    assert.equal("a b", v:read().alive)
    -- b stays silent while a writes: its session ends a session after the log came back
    v:beats("a", 1, 41000, 50000)
    assert.equal(ALIVE, v:read().peers.b.state)
    v:feed(rec.heartbeat("a", 1), 50001)
    assert.equal(DEAD, v:read().peers.b.state)
    assert.equal("a", v:read().alive)
    -- a silence of half a session or less counts as ever
    local w = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    w:beats("a", 1, 6100, 11100, 5000)
    w:feed(rec.heartbeat("a", 1), 11101)
    assert.equal(DEAD, w:read().peers.b.state)
  end)

  it("moves leadership on a leave notice at once", function()
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    v:feed(rec.leave("a", 1), 1200)
    local r = v:read()
    assert.equal(LEFT, r.peers.a.state)
    assert.equal("b", r.leader)
  end)

  it("replaces an incarnation by a newer one of the same id, and ignores the older", function()
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    v:feed(rec.heartbeat("a", 2), 1200)
    local r = v:read()
    assert.equal(2, r.peers.a.inc)
    assert.equal(ALIVE, r.peers.a.state)
    -- the new incarnation joined after b: b leads now
    assert.equal("b", r.leader)
    v:feed(rec.heartbeat("a", 1), 1300) -- a late heartbeat of the old one
    assert.equal(2, v:read().peers.a.inc)
    assert.equal("b a", v:read().alive)
  end)

  it("installs only the leader's assignment based on the current epoch", function()
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    v:feed(rec.assign("b", 1, 1, 0, { "a", "b" }, { [0] = 0, 0, 1, 1 }, 4), 1200)
    assert.equal(0, v:read().epoch) -- b does not lead
    v:feed(rec.assign("a", 1, 6, 5, { "a", "b" }, { [0] = 0, 0, 1, 1 }, 4), 1200)
    assert.equal(0, v:read().epoch) -- based on an epoch that is not the current one
    v:feed(rec.assign("a", 1, 1, 0, { "a", "b" }, { [0] = 0, 0, 1, 1 }, 4), 1300)
    local r = v:read()
    assert.equal(1, r.epoch)
    assert.equal(4, r.ntasks)
    assert.same({ [0] = "a", "a", "b", "b" }, r.owner)
    -- nobody held them: each goes to its owner at once
    assert.same({ [0] = "a", "a", "b", "b" }, r.holder)
  end)

  it("adds the leader's generations in order, once each, and keeps them in checkpoints",
     function()
    local n = ffi.new("int32_t[1]")
    local function moves(v) return ffi.string(C.bk_ffi_member_generations(v.s, n)), n[0] end
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    assert.same({ "", 0 }, { moves(v) })
    v:feed(rec.generation("b", 1, 0, 1, 12), 1200) -- not the leader
    v:feed(rec.generation("a", 2, 0, 1, 12), 1200) -- not the leader's incarnation
    assert.same({ "", 0 }, { moves(v) })
    v:feed(rec.generation("a", 1, 0, 1, 12), 1300)
    assert.same({ "1=12", 1 }, { moves(v) })
    v:feed(rec.generation("a", 1, 0, 1, 5), 1400) -- written on the same list: the first won
    v:feed(rec.generation("a", 1, 2, 1, 5), 1400) -- follows a move nobody saw
    assert.same({ "1=12", 1 }, { moves(v) })
    v:feed(rec.generation("a", 1, 1, 0, 3), 1500)
    assert.same({ "1=12,0=3", 2 }, { moves(v) })
    -- the leader changes: the new one adds the next
    v:feed(rec.leave("a", 1), 1600):feed(rec.generation("b", 1, 2, 1, 5), 1700)
    assert.same({ "1=12,0=3,1=5", 3 }, { moves(v) })
    -- a checkpoint carries them; a view loaded from it goes on from there
    local w = assert(from_checkpoint(v:checkpoint("b", 1)))
    w:feed(rec.heartbeat("b", 1), 1800)
    assert.same({ "1=12,0=3,1=5", 3 }, { moves(w) })
    w:feed(rec.generation("b", 1, 3, 1, 7), 1900)
    assert.same({ "1=12,0=3,1=5,1=7", 4 }, { moves(w) })
  end)

  it("keeps every drained task once, in order, from whoever says so, and in checkpoints",
     function()
    local n = ffi.new("int32_t[1]")
    local function drained(v)
      local p, out = C.bk_ffi_member_drained(v.s, n), {}
      for i = 0, n[0] - 1 do out[#out + 1] = p[i] end
      return out
    end
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    assert.same({}, drained(v))
    v:feed(rec.drained("b", 1, 7), 1200):feed(rec.drained("a", 1, 3), 1300)
    v:feed(rec.drained("a", 2, 7), 1400) -- again, from another incarnation: once
    v:feed(rec.drained("c", 1, 12), 1500) -- a node the view does not know: still true
    assert.same({ 3, 7, 12 }, drained(v))
    for t = 40, 1, -3 do v:feed(rec.drained("a", 1, t), 1600) end
    local want = { 1, 3, 4, 7, 10, 12, 13, 16, 19, 22, 25, 28, 31, 34, 37, 40 }
    assert.same(want, drained(v))
    local w = assert(from_checkpoint(v:checkpoint("a", 1)))
    assert.same(want, drained(w))
    w:feed(rec.drained("b", 1, 5000), 1700)
    want[#want + 1] = 5000
    assert.same(want, drained(w))
  end)

  it("keeps a moved task with its holder until it releases it or dies", function()
    local v = view():feed(rec.heartbeat("a", 1), 1000):feed(rec.heartbeat("b", 1), 1100)
    v:feed(rec.assign("a", 1, 1, 0, { "a", "b" }, { [0] = 0, 0, 0, 1 }, 4), 1200)
    v:feed(rec.assign("a", 1, 2, 1, { "a", "b" }, { [0] = 0, 1, 1, 1 }, 4), 1300)
    local r = v:read()
    assert.same({ [0] = "a", "b", "b", "b" }, r.owner)
    assert.same({ [0] = "a", "a", "a", "b" }, r.holder) -- handoffs in progress
    v:feed(rec.release("a", 1, 2, { 1 }), 1400)
    assert.same({ [0] = "a", "b", "a", "b" }, v:read().holder)
    -- a release by someone who does not hold the task changes nothing
    v:feed(rec.release("b", 1, 2, { 2 }), 1450)
    assert.equal("a", v:read().holder[2])
    -- a dies with task 2 unreleased: it is free, and goes to its owner (b heartbeats on)
    v:beats("b", 1, 2000, 12000)
    r = v:read()
    assert.equal(DEAD, r.peers.a.state)
    assert.equal("b", r.holder[2])
  end)

  it("refuses a malformed record without changing anything", function()
    local v = view():feed(rec.heartbeat("a", 1), 1000)
    local before = v:read()
    local hb = rec.heartbeat("b", 1)
    v:feed("not a record", 1100)
    v:feed(hb:sub(1, 4), 1100) -- cut short in its id
    v:feed(string.char(0xbe, 99) .. hb:sub(3), 1100) -- a version this reader does not know
    v:feed("", 1100)
    assert.same(before, v:read())
  end)

  -- A history that exercises every rule: joins, progress, assignments (full, delta, ignored),
  -- handoffs, a release, a replaced incarnation, a leave, a death by session, a checkpoint
  -- record, and records that are not the membership's. { record, timestamp } in log order.
  local function history()
    local nodes = { "a", "b", "c" }
    return {
      { rec.heartbeat("a", 1), 1000 },
      { rec.heartbeat("b", 1), 1100 },
      { rec.progress("a", 1, { 0, 2 }, { 10, -1 }), 1150 },
      { rec.assign("a", 1, 1, 0, { "a", "b" }, { [0] = 0, 0, 1, 1 }, 4), 1200 },
      { rec.heartbeat("c", 1), 1300 },
      { "not a member record", 1310 },
      { rec.assign("a", 1, 2, 1, nodes, { [0] = 0, 2, 1, 2 }, 4), 1400 },
      { rec.assign("b", 1, 3, 2, nodes, { [0] = 1, 1, 1, 1 }, 4), 1450 }, -- not the leader
      { rec.progress("b", 1, { 1, 2, 3 }, { 5, 6, 7 }), 1500 },
      { rec.release("a", 1, 2, { 1 }), 1600 },
      { rec.progress("b", 1, { 1, 2, 3 }, { 5, 9, 7 }), 2500 },
      { rec.heartbeat("c", 2), 2600 }, -- c restarts: the old one is replaced
      { rec.progress("a", 1, { 0 }, { 12 }), 3000 },
      { rec.leave("b", 1), 3100 },
      { rec.assign("a", 1, 3, 2, { "a", "", "c" }, { [0] = 0, 2, 0, 2 }, 4), 3200 },
      { rec.heartbeat("c", 2), 7000 },
      { rec.heartbeat("c", 2), 11000 },
      { rec.heartbeat("a", 1), 12000 },
      { rec.heartbeat("c", 2), 14000 }, -- log time 14000: b's leave is a session old
      { rec.heartbeat("c", 2), 18000 },
      { rec.heartbeat("c", 2), 22001 }, -- a's last heartbeat is past its session: a died
      { rec.assign("c", 2, 4, 3, { "", "", "c" }, { [0] = 2, 2, 2, 2 }, 4), 22100 },
      { rec.heartbeat("a", 3), 22200 }, -- a again, a new incarnation
    }
  end

  local function same_views(x, y, what)
    local rx, ry = x:read(), y:read()
    assert.equal(x:state(), y:state(), what .. ": states differ")
    for _, f in ipairs({ "alive", "leader", "epoch", "ntasks" }) do
      assert.equal(rx[f], ry[f], what .. ": " .. f)
    end
    assert.same(rx.owner, ry.owner, what .. ": owners")
    assert.same(rx.holder, ry.holder, what .. ": holders")
  end

  it("loads from a checkpoint taken after any record the view a full replay has", function()
    local h = history()
    local full = view()
    for _, r in ipairs(h) do full:feed(r[1], r[2]) end
    assert.equal(4, full:read().epoch) -- the history did go somewhere
    assert.equal("c a", full:read().alive)
    for k = 0, #h do
      -- the checkpoint is taken after k records and lands in the log after record k + 2
      -- (records written meanwhile come between): the loaded view replays from k
      local head = view()
      for i = 1, k do head:feed(h[i][1], h[i][2]) end
      local cp = head:checkpoint("a", 1)
      local log = {}
      for i = 1, #h do
        log[#log + 1] = h[i]
        if i == math.min(k + 2, #h) then log[#log + 1] = { cp, h[i][2] } end
      end
      local whole = view()
      for _, r in ipairs(log) do whole:feed(r[1], r[2]) end
      local loaded = assert(from_checkpoint(cp))
      assert.equal(k, loaded.offset)
      same_views(head, loaded, "after loading at " .. k)
      for i = k + 1, #log do loaded:feed(log[i][1], log[i][2]) end
      same_views(whole, loaded, "checkpoint after record " .. k)
    end
  end)

  it("notes a checkpoint record without moving log time", function()
    local v = view():feed(rec.heartbeat("a", 1), 1000)
    local before = v:read()
    local w = view():feed(rec.heartbeat("a", 1), 1000)
    v:feed(w:checkpoint("a", 1), 99999)
    assert.same(before, v:read())
    -- a's session still ends 10 s after its heartbeat, not after the checkpoint's time
    v:beats("b", 1, 5000, 10000, 5000):feed(rec.heartbeat("b", 1), 11001)
    assert.equal(DEAD, v:read().peers.a.state)
  end)

  it("refuses a checkpoint that is cut short or is not one, and keeps its view", function()
    local v = view()
    for _, r in ipairs(history()) do v:feed(r[1], r[2]) end
    local cp = v:checkpoint("a", 1)
    local target = view():feed(rec.heartbeat("z", 1), 500)
    local before = target:state()
    for _, bad in ipairs({ cp:sub(1, #cp - 1), cp:sub(1, 20), rec.heartbeat("a", 1), "",
                           cp:sub(1, 10) .. string.char(0xff):rep(12) .. cp:sub(23) }) do
      local last = ffi.new("int64_t[1]")
      assert.equal(-1, C.bk_ffi_member_load(target.s, bad, #bad, last, errp))
      assert.truthy(#ffi.string(errp[0]) > 0)
      assert.equal(before, target:state())
    end
    -- and takes the whole one
    assert.equal(0, C.bk_ffi_member_load(target.s, cp, #cp, ffi.new("int64_t[1]"), errp))
    assert.equal(v:state(), target:state())
  end)
end)
