-- Reconcile (runtime/cluster/reconcile.c): from what a node runs to what a membership view
-- asks, as a pure function. The node (runtime/node/node.c) executes these actions in order;
-- here each case checks them against what docs/cluster.md says a node must do.
local ffi = require "ffi"
local C = ffi.C

local T = 8 -- the app's tasks in every case
local NAMES = { "keep", "release", "revoked", "forget", "standbys", "promoted", "gained",
                "running" }

local function ints(list)
  local a = ffi.new("int32_t[?]", #list + 1)
  for i, v in ipairs(list) do a[i - 1] = v end
  return a, #list
end

local function sorted(list)
  table.sort(list)
  return list
end

-- now = { running =, standing =, was_sb = {task = true}, logged = epoch }
-- view = { epoch =, lost =, running =, standby =, waiting =, release = }
-- Returns the actions as Lua lists and flags, and the node's new was_sb set.
local function diff(now, view)
  local running, nrun = ints(now.running or {})
  local standing, nstand = ints(now.standing or {})
  local was = ffi.new("uint8_t[?]", T + 1)
  for t in pairs(now.was_sb or {}) do was[t] = 1 end
  local want, nwant = ints(view.running or {})
  local want_sb, nwant_sb = ints(view.standby or {})
  local waiting, nwaiting = ints(view.waiting or {})
  local release, nrelease = ints(view.release or {})
  local out = ffi.new("int32_t[?]", 11 * (T + 1))
  local counts = ffi.new("int32_t[12]")
  assert.equal(0, C.bk_ffi_reconcile(T, running, nrun, standing, nstand, was, now.logged or 0,
                                     view.epoch or 1, view.lost and 1 or 0, want, nwant,
                                     want_sb, nwant_sb, waiting, nwaiting, release, nrelease,
                                     out, counts))
  local r, off = {}, 0
  r.changed, r.log_unchanged = counts[0] == 1, counts[1] == 1
  r.change_actives, r.stop_standbys = counts[2] == 1, counts[3] == 1
  for i, name in ipairs(NAMES) do
    local list = {}
    for j = 0, counts[3 + i] - 1 do list[#list + 1] = out[off + j] end
    off = off + counts[3 + i]
    r[name] = name == "running" and list or sorted(list)
  end
  r.was_sb = {}
  for t = 0, T - 1 do if was[t] == 1 then r.was_sb[#r.was_sb + 1] = t end end
  return r
end

describe("reconcile", function()
  it("does nothing for the same tasks, and logs a new epoch once", function()
    local now = { running = { 0, 3 }, standing = { 5 }, logged = 4 }
    local r = diff(now, { epoch = 4, running = { 0, 3 }, standby = { 5 } })
    assert.is_false(r.changed)
    assert.is_false(r.log_unchanged)
    assert.same({}, r.keep)
    r = diff(now, { epoch = 5, running = { 0, 3 }, standby = { 5 } })
    assert.is_false(r.changed)
    assert.is_true(r.log_unchanged)
    assert.is_false(r.change_actives)
    assert.is_false(r.stop_standbys)
  end)

  it("starts gained tasks: on_assign hears only those, every new active runs", function()
    local r = diff({ running = { 1 } }, { running = { 1, 2, 6 }, waiting = { 7 } })
    assert.is_true(r.changed)
    assert.is_true(r.change_actives)
    assert.is_false(r.stop_standbys)
    assert.same({ 2, 6 }, r.gained)
    assert.same({ 1, 2, 6 }, r.running)
    assert.same({}, r.revoked)
    assert.same({}, r.promoted)
    -- the DBs of the new actives and of the task waiting for its release stay open
    assert.same({ 1, 2, 6, 7 }, r.keep)
  end)

  it("promotes a standby that becomes active in the same view (a death)", function()
    local r = diff({ running = { 0 }, standing = { 4 }, was_sb = { [4] = true } },
                   { running = { 0, 4 }, standby = { 1 } })
    assert.same({ 4 }, r.promoted)
    assert.same({ 4 }, r.gained)
    assert.is_true(r.stop_standbys)
    assert.same({ 1 }, r.standbys)
    -- 4 moved from standby to active: its progress is kept, not forgotten
    assert.same({}, r.forget)
    assert.same({ 1 }, r.was_sb)
  end)

  it("remembers a warm-up move across the view that drops the standby", function()
    -- epoch 1: the standby of 3 is dropped while 3 waits for its holder's release
    local r = diff({ running = { 0 }, standing = { 3 }, was_sb = { [3] = true } },
                   { epoch = 1, running = { 0 }, waiting = { 3 } })
    assert.same({}, r.promoted)
    assert.same({ 3 }, r.was_sb)
    -- its standby progress ends (it is not a replica here any more); its DB stays open
    assert.same({ 3 }, r.forget)
    assert.same({ 0, 3 }, r.keep)
    -- epoch 2: the release came: 3 starts here, a promotion
    r = diff({ running = { 0 }, was_sb = { [3] = true } }, { epoch = 2, running = { 0, 3 } })
    assert.same({ 3 }, r.promoted)
    assert.same({}, r.was_sb)
  end)

  it("promotes only tasks it kept a standby of", function()
    local r = diff({ running = {}, standing = { 2 }, was_sb = { [2] = true } },
                   { running = { 2, 5 } })
    assert.same({ 2 }, r.promoted)
    assert.same({ 2, 5 }, r.gained)
    -- a standby that is neither kept nor waiting is no longer one
    r = diff({ running = {}, standing = {}, was_sb = { [6] = true } }, { running = { 1 } })
    assert.same({}, r.was_sb)
  end)

  it("revokes actives given up and forgets only what the node keeps nothing of", function()
    local r = diff({ running = { 0, 1, 2 }, standing = { 5, 6 } },
                   { running = { 1 }, standby = { 0, 6 }, release = { 0, 2 } })
    assert.same({ 0, 2 }, r.revoked)
    assert.same({ 0, 2 }, r.release)
    -- 0 stays as a standby; 2 and the dropped standby 5 are forgotten
    assert.same({ 2, 5 }, r.forget)
    assert.same({ 0, 6 }, r.standbys)
    assert.same({ 0, 6 }, r.was_sb)
  end)

  it("restarts the actives when tasks must be released even if the set is unchanged", function()
    local r = diff({ running = { 1, 2 } }, { running = { 1, 2 }, release = { 4 } })
    assert.is_true(r.changed)
    assert.is_true(r.change_actives)
    assert.same({ 4 }, r.release)
    assert.same({}, r.gained)
  end)

  it("stops everything when the control plane is lost", function()
    local r = diff({ running = { 0, 3 }, standing = { 1 }, was_sb = { [1] = true } },
                   { lost = true, running = { 0, 3 }, standby = { 1 }, waiting = { 4 } })
    assert.is_true(r.change_actives)
    assert.is_true(r.stop_standbys)
    assert.same({}, r.running)
    assert.same({}, r.standbys)
    assert.same({ 0, 3 }, r.revoked)
    assert.same({ 0, 1, 3 }, r.forget)
    assert.same({}, r.keep)
    assert.same({}, r.was_sb)
    assert.is_false(r.log_unchanged)
  end)
end)
