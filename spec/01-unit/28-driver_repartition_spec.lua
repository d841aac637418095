-- Repartitioning in the test driver (driver:repartition, docs/repartitioning.md): a stateful
-- subtopology moves to another task count between records; its state moves by key group
-- (runtime/engine/regroup.c, real RocksDB), nothing replayed, nothing lost or counted twice,
-- and every key's records keep their order.
local beck = require "beck"
local testing = require "beck.testing"
local ffi = require "ffi"

local close_driver = require("spec.helpers").close_driver
local C = ffi.C

-- The task of n owning key's group.
local function owner(key, n)
  local g = C.bk_ffi_hash_key_group(key, #key)
  local lo, hi = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
  for q = 0, n - 1 do
    C.bk_ffi_hash_group_range(q, n, lo, hi)
    if g >= lo[0] and g < hi[0] then return q end
  end
end

-- Counts by key in store "n"; each count goes out as "<count>@<task>": the task it was
-- counted in travels with it.
local function counting_app(id)
  local app = beck.app { id = id }
  app:source("src", "in")
  app:processor("count", {
    process = function(ctx, k)
      local st = ctx:store("n")
      local c = tonumber(st:get(k) or "0") + 1
      st:put(k, tostring(c))
      ctx:forward(k, c .. "@" .. ctx:partition())
    end,
  }, "src")
  app:store("n", "count")
  app:sink("out", "out", "count")
  return app
end

describe("driver:repartition", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("moves a count by key from 4 tasks to 6, 3 and 16 with every count exact and in order",
     function()
    driver = testing.driver(counting_app("rp1"), { partitions = 4, cache_max_bytes = 0 })
    local input = driver:input("in")
    local sent, keys = {}, {}
    for i = 1, 300 do keys[i] = "key-" .. i end
    local function pipe(rounds)
      for r = 1, rounds do
        for i = 1 + (r % 7), #keys, 3 do
          input:pipe(keys[i], "x")
          sent[keys[i]] = (sent[keys[i]] or 0) + 1
        end
      end
    end
    local seen, tasks = {}, nil
    local function check(n)
      for _, rec in ipairs(driver:output("out"):read_all()) do
        local count, task = rec.value:match("^(%d+)@(%d+)$")
        count, task = tonumber(count), tonumber(task)
        -- every value from 1 to the key's count, once and in order: nothing lost, nothing
        -- counted twice, the key's order kept across the moves
        assert.equal((seen[rec.key] or 0) + 1, count, "key " .. rec.key)
        seen[rec.key] = count
        if n then
          assert.equal(owner(rec.key, n), task, rec.key .. " counted outside its key group")
        end
      end
      for k, c in pairs(sent) do
        assert.equal(c, seen[k], "key " .. k)
        assert.equal(tostring(c), driver:store("n"):get(k))
      end
      tasks = table.maxn(driver.fns.tasks)
    end

    pipe(5)
    check(nil)
    driver:repartition(0, 6)
    pipe(4)
    check(6)
    driver:repartition(0, 3)
    pipe(4)
    check(3)
    driver:repartition(0, 16)
    pipe(3)
    check(16)
    local stored, nsent = 0, 0
    for _ in driver:store("n"):all() do stored = stored + 1 end
    for _ in pairs(sent) do nsent = nsent + 1 end
    assert.equal(nsent, stored) -- each key once, in the task owning it
    assert.equal(16 + 3 + 6 + 4, tasks) -- task slots used: the old ones are not reused
  end)

  it("runs init once per new task and close once per old one, and keeps stream time",
     function()
    local inits, closes = {}, {}
    local app = beck.app { id = "rp2" }
    app:source("src", "in")
    app:processor("p", {
      init = function(ctx) inits[#inits + 1] = ctx:task_id() end,
      close = function(ctx) closes[#closes + 1] = ctx:task_id() end,
      process = function(ctx, k, v)
        ctx:store("s"):put(k, v)
        ctx:forward(k, tostring(ctx:stream_time()))
      end,
    }, "src")
    app:store("s", "p")
    app:sink("out", "out", "p")
    driver = testing.driver(app, { partitions = 2 })
    driver:input("in"):pipe("a", "1", 1000)
    driver:input("in"):pipe("b", "2", 5000)
    assert.equal(2, #inits)
    driver:repartition(0, 5)
    assert.equal(7, #inits)
    assert.equal(2, #closes)
    -- a record older than the stream time it arrives to sees the older tasks' time
    driver:input("in"):pipe("a", "3", 10)
    local out = driver:output("out"):read_all()
    local last = out[#out]
    assert.is_true(tonumber(last.value) >= 1000, "stream time " .. last.value)
    assert.equal("3", driver:store("s"):get("a"))
    assert.equal("2", driver:store("s"):get("b"))
  end)

  it("starts a subtopology at the task count the tasks setting gives it", function()
    driver = testing.driver(counting_app("rp4"), { partitions = 2, tasks = "0=7",
                                                   cache_max_bytes = 0 })
    local input = driver:input("in")
    local want = {}
    for i = 1, 200 do
      local k = "k" .. (i % 40)
      input:pipe(k, "x")
      want[k] = (want[k] or 0) + 1
    end
    local seen = {}
    for _, rec in ipairs(driver:output("out"):read_all()) do
      local count, task = rec.value:match("^(%d+)@(%d+)$")
      assert.equal(owner(rec.key, 7), tonumber(task), rec.key .. " counted outside its group")
      assert.equal((seen[rec.key] or 0) + 1, tonumber(count), "key " .. rec.key)
      seen[rec.key] = tonumber(count)
    end
    assert.same(want, seen)
    assert.equal(2 + 7, table.maxn(driver.fns.tasks))
    assert.has_error(function()
      testing.driver(counting_app("rp5"), { tasks = "0=x" })
    end, "setting 'tasks': '0=x' is not S=N (a subtopology and a task count)")
  end)

  it("finds the owner of every key group under every task count (bk_hash_group_owner)",
     function()
    local lo, hi = ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
    for _, n in ipairs { 1, 2, 3, 5, 7, 12, 16, 100, 1000, 4095, 4096 } do
      for q = 0, n - 1 do
        C.bk_ffi_hash_group_range(q, n, lo, hi)
        assert.is_true(hi[0] > lo[0], "empty range")
        for g = lo[0], hi[0] - 1 do
          if C.bk_ffi_hash_group_owner(g, n) ~= q then
            error(string.format("group %d of %d tasks: owner %d, range of %d", g, n,
                                C.bk_ffi_hash_group_owner(g, n), q))
          end
        end
      end
    end
  end)

  it("says what is wrong with its arguments", function()
    driver = testing.driver(counting_app("rp3"), { partitions = 2 })
    assert.has_error(function() driver:repartition(3, 4) end,
                     "driver:repartition: subtopology must be 0 to 0, got 3")
    assert.has_error(function() driver:repartition(0, 0) end,
                     "driver:repartition: the task count must be 1 to 4096, got 0")
    assert.has_error(function() driver:repartition(0, 2.5) end,
                     "driver:repartition: the task count must be 1 to 4096, got 2.5")
  end)

  it("runs the example of docs/testing.md", function()
    local app = beck.app { id = "clicks" }
    app:stream("clicks"):group_by_key():count { store = "counts" }:to("click-counts")
    driver = testing.driver(app, { partitions = 4 })
    driver:input("clicks"):pipe_list { { "ann", "/" }, { "bob", "/a" }, { "ann", "/b" } }
    driver:repartition(0, 6)
    driver:input("clicks"):pipe("ann", "/c")
    assert.equal("3", driver:store("counts"):get("ann"))
    assert.equal("1", driver:store("counts"):get("bob"))
  end)
end)
