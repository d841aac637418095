-- Key-value stores with a time to live (app:store's ttl and ttl_clock, docs/state.md, TTL),
-- in the test driver on real RocksDB: a value is gone ttl ms after its write time, by record
-- time (the task's stream time) or by the wall clock (the driver's), with the record cache on
-- and off; reads and scans never return it, the sweep at each commit deletes it from RocksDB
-- (`beck dump` of the closed store shows what is left), and the DSL's aggregations and
-- tables take the same options.
local beck = require "beck"
local testing = require "beck.testing"
local helpers = require "spec.helpers"
local cjson = require "cjson.safe"

local close_driver = helpers.close_driver

-- Records "put K V" store V under K; "get K" forwards K's value (or "nil"); "scan" forwards
-- the keys in the store, space separated.
local function ttl_app(id, opts)
  local app = beck.app { id = id }
  app:source("src", "in")
  app:processor("p", {
    process = function(ctx, _, cmd)
      local st = ctx:store("s")
      local op, k, v = cmd:match("^(%S+) ?(%S*) ?(%S*)$")
      if op == "put" then
        st:put(k, v)
      elseif op == "get" then
        ctx:forward(k, st:get(k) or "nil")
      elseif op == "scan" then
        local keys = {}
        for key in st:all() do keys[#keys + 1] = key end
        ctx:forward("scan", table.concat(keys, " "))
      end
    end,
  }, "src")
  app:store("s", opts, "p")
  app:sink("out", "out", "p")
  return app
end

local function last_value(driver)
  local all = driver:output("out"):read_all()
  return all[#all] and all[#all].value
end

describe("a store with a time to live", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  for _, cache in ipairs { 0, 1048576 } do
    it("forgets a value ttl ms after its record's time (cache " .. cache .. ")", function()
      driver = testing.driver(ttl_app("ttl1", { ttl = 1000 }), { cache_max_bytes = cache })
      local input = driver:input("in")
      input:pipe("x", "put a 1", 0)
      input:pipe("x", "put b 2", 600)
      input:pipe("x", "get a", 999)
      assert.equal("1", last_value(driver))
      -- stream time 1000: a (written at 0) is gone, b (600) is not
      input:pipe("x", "get a", 1000)
      assert.equal("nil", last_value(driver))
      input:pipe("x", "scan", 1000)
      assert.equal("b", last_value(driver))
      assert.is_nil(driver:store("s"):get("a"))
      assert.equal("2", driver:store("s"):get("b"))
      -- a record older than the stream time does not bring it back
      input:pipe("x", "get a", 10)
      assert.equal("nil", last_value(driver))
      -- written again: alive again, from its new time
      input:pipe("x", "put a 3", 1500)
      input:pipe("x", "get a", 2400)
      assert.equal("3", last_value(driver))
      input:pipe("x", "get b", 2400)
      assert.equal("nil", last_value(driver))
      input:pipe("x", "scan", 2400)
      assert.equal("a", last_value(driver))
    end)
  end

  for _, cache in ipairs { 0, 1048576 } do
    it("counts on the driver's wall clock with ttl_clock = \"wall\" (cache " .. cache .. ")",
       function()
      driver = testing.driver(ttl_app("ttl2", { ttl = 5000, ttl_clock = "wall" }),
                              { wall_clock = 100000, cache_max_bytes = cache })
      local input = driver:input("in")
      input:pipe("x", "put a 1", 1)
      input:pipe("x", "get a", 999999) -- record time does not matter
      assert.equal("1", last_value(driver))
      driver:advance_wall_clock(4999)
      assert.equal("1", driver:store("s"):get("a"))
      driver:advance_wall_clock(1)
      assert.is_nil(driver:store("s"):get("a"))
      input:pipe("x", "get a", 1)
      assert.equal("nil", last_value(driver))
    end)
  end

  it("deletes expired entries from RocksDB in the background, at each commit", function()
    local dir = helpers.tmpdir()
    driver = testing.driver(ttl_app("ttl3", { ttl = 1000 }), { state_dir = dir })
    local input = driver:input("in")
    for i = 1, 50 do input:pipe("k" .. i, "put old" .. i .. " x", 0) end
    for i = 1, 30 do input:pipe("k" .. i, "put new" .. i .. " y", 500) end
    input:pipe("x", "get nothing", 1200) -- stream time 1200: the old ones expire
    driver = close_driver(driver)
    local st, out, err = helpers.run({ helpers.beck_bin(), "dump", "--state-dir", dir, "--app",
                                       "ttl3", "--task", "0_0", "--store", "s" })
    assert.equal(0, st, err)
    local keys = {}
    for line in out:gmatch("[^\n]+") do
      local r = assert(cjson.decode(line))
      keys[#keys + 1] = r.key
    end
    table.sort(keys)
    assert.equal(30, #keys, "left on disk: " .. table.concat(keys, " "))
    for _, k in ipairs(keys) do assert.matches("^new%d+$", k) end
  end)

  it("works in the DSL's count and table, and says what is wrong with its options", function()
    local app = beck.app { id = "ttl4" }
    app:stream("clicks"):group_by_key():count { store = "counts", ttl = 60000 }:to("click-counts")
    driver = testing.driver(app, { cache_max_bytes = 0 })
    local input = driver:input("clicks")
    input:pipe("ann", "/", 0)
    input:pipe("ann", "/a", 1000)
    input:pipe("bob", "/", 30000)
    input:pipe("ann", "/b", 61000) -- 60 s after ann's last count: it starts again
    local counts = {}
    for _, r in ipairs(driver:output("click-counts"):read_all()) do
      counts[#counts + 1] = r.key .. "=" .. r.value
    end
    assert.same({ "ann=1", "ann=2", "bob=1", "ann=1" }, counts)
    assert.equal("1", driver:store("counts"):get("bob"))

    local function err_of(f)
      local ok, e = pcall(f)
      assert.is_false(ok)
      return tostring(e)
    end
    assert.matches("store 's': ttl must be a positive number of ms",
                   err_of(function() ttl_app("ttl5", { ttl = -1 }) end))
    assert.matches("store 's': ttl is for key%-value stores",
                   err_of(function() ttl_app("ttl6", { ttl = 10, kind = "window" }) end))
    assert.matches("store 's': ttl_clock must be \"record\" or \"wall\"",
                   err_of(function() ttl_app("ttl7", { ttl = 10, ttl_clock = "sun" }) end))
    assert.matches("count: store c: ttl must be a positive number of ms, got 0", err_of(function()
      local a = beck.app { id = "ttl8" }
      a:stream("x"):group_by_key():count { store = "c", ttl = 0 }
    end))
  end)
end)
