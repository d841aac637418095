-- The state move of repartitioning (runtime/engine/regroup.c) on real RocksDB: a task's state
-- built from the state of the tasks of the generation before by key-group ranges, with no
-- replay. Stores are written as the record path writes them (the test driver's DBs: keys
-- prefixed with their key group, a window store under its record keys' groups), the DBs
-- closed, then rebuilt for other task counts and read back key by key.
local ffi = require "ffi"
local bit = require "bit"
local helpers = require "spec.helpers"
local C = ffi.C

local G = 4096
local NKEYS = 20000
local errp = ffi.new("const char *[1]")

local function range(t, n)
  local lo, hi = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
  C.bk_ffi_hash_group_range(t, n, lo, hi)
  return lo[0], hi[0]
end

local function group(k) return C.bk_ffi_hash_key_group(k, #k) end

-- The task of n that owns key group g under range ownership.
local function owner(g, n)
  for t = 0, n - 1 do
    local lo, hi = range(t, n)
    if g >= lo and g < hi then return t end
  end
end

local function be32(n)
  return string.char(bit.band(bit.rshift(n, 24), 255), bit.band(bit.rshift(n, 16), 255),
                     bit.band(bit.rshift(n, 8), 255), bit.band(n, 255))
end
-- A window store key (base/keys.h): [record key length][record key][8-byte time].
local function wkey(k, t) return be32(#k) .. k .. be32(0) .. be32(t) end

local NAMES = ffi.new("const char *[2]", { "counts", "win" })
local FLAGS = ffi.new("int32_t[2]", { 0, 2 }) -- a key-value store and a window store

local function open_tasks(dirs)
  local drv = ffi.gc(C.bk_ffi_driver_new(#dirs), C.bk_ffi_driver_free)
  for t, dir in ipairs(dirs) do
    assert(C.bk_ffi_driver_open_task(drv, t - 1, dir, NAMES, FLAGS, 2) == 0,
           ffi.string(C.bk_ffi_driver_error(drv)))
  end
  return drv
end

local function close_tasks(drv)
  C.bk_ffi_driver_free(ffi.gc(drv, nil))
end

-- n tasks whose stores hold the keys k1..kN as task_of(key) places them; every key in both
-- stores: counts[k] = "v<i>", win[wkey(k, i)] = "w<i>".
local function make_generation(root, n, task_of)
  local dirs = {}
  for t = 1, n do dirs[t] = root .. "/g0-" .. t end
  local drv = open_tasks(dirs)
  for i = 1, NKEYS do
    local k, t = "k" .. i, task_of("k" .. i)
    local v, w, wk = "v" .. i, "w" .. i, wkey("k" .. i, i)
    assert(C.bk_ffi_store_put(C.bk_ffi_driver_store(drv, t, 0), k, #k, v, #v, i) == 0)
    assert(C.bk_ffi_store_put(C.bk_ffi_driver_store(drv, t, 1), wk, #wk, w, #w, i) == 0)
  end
  assert(C.bk_ffi_driver_commit(drv) == 0, ffi.string(C.bk_ffi_driver_error(drv)))
  close_tasks(drv)
  return dirs
end

-- A task's RocksDB inside its state directory (engine/db.c).
local function rdb(dir) return dir .. "/rocksdb" end

-- Builds generation `name` of n range-owned tasks from `from` (task directories, groups[k] =
-- { lo, hi }), each task's RocksDB built where bk_db_open looks for it.
local function rebuild(root, name, from, groups, n)
  local paths = {}
  for k, dir in ipairs(from) do paths[k] = rdb(dir) end
  local srcs = ffi.new("const char *[?]", #from, paths)
  local g = ffi.new("int32_t[?]", 2 * #from)
  for k = 1, #from do g[2 * k - 2], g[2 * k - 1] = groups[k][1], groups[k][2] end
  local dirs, stats, newgroups = {}, {}, {}
  for t = 0, n - 1 do
    local lo, hi = range(t, n)
    local dir = string.format("%s/%s-%d", root, name, t)
    local st = ffi.new("int64_t[7]")
    assert(C.bk_ffi_regroup_build(rdb(dir), srcs, g, #from, lo, hi, st, errp) == 0,
           errp[0] ~= nil and ffi.string(errp[0]))
    dirs[#dirs + 1], newgroups[#newgroups + 1] = dir, { lo, hi }
    stats[#stats + 1] = { primary = tonumber(st[0]), linked = tonumber(st[1]),
                          copied = tonumber(st[2]), dropped = tonumber(st[4]),
                          used = tonumber(st[5]), ms = tonumber(st[6]) }
  end
  local linked, copied, dropped, ms = 0, 0, 0, 0
  for _, x in ipairs(stats) do
    linked, copied, dropped, ms = linked + x.linked, copied + x.copied, dropped + x.dropped,
                                  ms + x.ms
  end
  helpers.trace("%d -> %d tasks: %d SST bytes linked, %d keys copied, %d files dropped, %d ms",
                #from, n, linked, copied, dropped, ms)
  return dirs, newgroups, stats
end

-- Every key is in the task that owns its group, once, with its values; no task holds a
-- group it does not own.
local function check_generation(dirs, groups)
  local n = #dirs
  local total = 0
  for t = 1, n do
    local bad, nkeys = ffi.new("int32_t[1]", -1), ffi.new("int64_t[1]")
    local rc = C.bk_ffi_regroup_check(rdb(dirs[t]), groups[t][1], groups[t][2], bad, nkeys, errp)
    assert.equal(1, rc, string.format("task %d of %d holds key group %d, outside [%d, %d)",
                                      t - 1, n, bad[0], groups[t][1], groups[t][2]))
    total = total + tonumber(nkeys[0])
  end
  -- a key-value entry, a window entry (and its index entries, if any) per key: nothing
  -- lost, nothing doubled
  local drv = open_tasks(dirs)
  local vp, vl = ffi.new("const char *[1]"), ffi.new("size_t[1]")
  local found = 0
  for i = 1, NKEYS do
    local k, wk = "k" .. i, wkey("k" .. i, i)
    local t = owner(group(k), n)
    assert.equal(1, C.bk_ffi_store_get(C.bk_ffi_driver_store(drv, t, 0), k, #k, vp, vl))
    assert.equal("v" .. i, ffi.string(vp[0], vl[0]))
    assert.equal(1, C.bk_ffi_store_get(C.bk_ffi_driver_store(drv, t, 1), wk, #wk, vp, vl))
    assert.equal("w" .. i, ffi.string(vp[0], vl[0]))
    found = found + 1
  end
  close_tasks(drv)
  assert.equal(NKEYS, found)
  return total
end

describe("the state move of repartitioning", function()
  after_each(helpers.cleanup)

  it("splits the key groups into contiguous ranges that cover them once", function()
    for _, n in ipairs { 1, 5, 8, 12, 4096 } do
      local next_lo = 0
      for t = 0, n - 1 do
        local lo, hi = range(t, n)
        assert.equal(next_lo, lo)
        assert.is_true(hi - lo == math.floor(G / n) or hi - lo == math.ceil(G / n))
        next_lo = hi
      end
      assert.equal(G, next_lo)
    end
  end)

  it("moves 8 tasks partitioned by input to 12, 5 and 16 by key group, no key lost, "
     .. "doubled or out of range", function()
    local root = helpers.tmpdir()
    -- generation 0: 8 tasks reading an input of 8 partitions (Kafka's murmur2): every task
    -- may hold any key group
    local g0 = make_generation(root, 8, function(k) return C.bk_ffi_hash_partition(k, #k, 8) end)
    local all = {}
    for k = 1, 8 do all[k] = { 0, G } end
    local entries0 = 0
    for t = 1, 8 do
      local nk = ffi.new("int64_t[1]")
      assert.equal(1, C.bk_ffi_regroup_check(rdb(g0[t]), 0, G, nil, nk, errp))
      entries0 = entries0 + tonumber(nk[0])
    end

    local g1, groups1, stats1 = rebuild(root, "g1", g0, all, 12)
    assert.equal(entries0, check_generation(g1, groups1))
    for _, s in ipairs(stats1) do
      assert.equal(8, s.used) -- every input partition held keys of every range
      assert.is_true(s.copied > 0)
    end

    -- 12 -> 5: not a multiple; each new task overlaps 3 or 4 old ones, one taken whole
    local g2, groups2, stats2 = rebuild(root, "g2", g1, groups1, 5)
    assert.equal(entries0, check_generation(g2, groups2))
    for _, s in ipairs(stats2) do
      assert.is_true(s.linked > 0, "nothing hard-linked")
      assert.is_true(s.used >= 3 and s.used <= 4, s.used .. " sources")
    end

    -- 5 -> 16: most new tasks lie inside one old task: hard links and a range delete
    local g3, groups3, stats3 = rebuild(root, "g3", g2, groups2, 16)
    assert.equal(entries0, check_generation(g3, groups3))
    local linked_only = 0
    for _, s in ipairs(stats3) do
      if s.copied == 0 then linked_only = linked_only + 1 end
    end
    -- the 4 boundaries of 5 tasks fall inside 4 of the 16 ranges; the other 12 ranges lie
    -- inside one old task
    assert.equal(12, linked_only)
  end)

  it("refuses what it cannot build, says why, and leaves nothing behind", function()
    local root = helpers.tmpdir()
    local g0 = make_generation(root, 1, function() return 0 end)
    local srcs = ffi.new("const char *[1]", { rdb(g0[1]) })
    local groups = ffi.new("int32_t[2]", { 0, G })
    local st = ffi.new("int64_t[7]")
    -- the destination exists
    assert.equal(-1, C.bk_ffi_regroup_build(rdb(g0[1]), srcs, groups, 1, 0, G, st, errp))
    assert.matches("exists", ffi.string(errp[0]))
    -- an empty range
    assert.equal(-1, C.bk_ffi_regroup_build(root .. "/x", srcs, groups, 1, 7, 7, st, errp))
    assert.is_nil(helpers.read_file(root .. "/x/CURRENT"))
    -- a source that is not a RocksDB: named, and the half-built destination removed
    local bad = ffi.new("const char *[2]", { rdb(g0[1]), root .. "/nothing-here" })
    local g2 = ffi.new("int32_t[4]", { 0, 2048, 2048, G })
    assert.equal(-1, C.bk_ffi_regroup_build(root .. "/y", bad, g2, 2, 0, G, st, errp))
    assert.matches("nothing%-here", ffi.string(errp[0]))
    assert.is_nil(helpers.read_file(root .. "/y/CURRENT"))
  end)
end)
