-- beck.dsl sliding windows (Kafka Streams' SlidingWindows, KIP-450) through the test driver:
-- the windows a record makes and updates, at Kafka Streams' timestamps; every window's
-- final count is the number of records within its bounds whatever their order; late
-- records; emit final; a retention too short. scripts/parity compares them with Kafka
-- Streams 4.4 itself (the sliding, sliding_final and sliding_reduce topologies).
local beck = require "beck"
local dsl = require "beck.dsl"
local testing = require "beck.testing"

local close_driver = require("spec.helpers").close_driver
local ktv = require("spec.helpers").ktv

local function counting(td, grace, opts)
  local app = beck.app { id = "sliding" }
  app:stream("in"):group_by_key():windowed_by(dsl.sliding(td):grace(grace)):count(opts)
     :to_stream():to("out")
  return app
end

describe("beck.dsl sliding windows", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("make a record's left window, the right window of the one before, and update the rest",
     function()
    driver = testing.driver(counting(10, 100))
    local input, out = driver:input("in"), driver:output("out")
    input:pipe("a", "x", 20)
    assert.same({ { "a@10", 20, "1" } }, ktv(out:read_all()))
    input:pipe("a", "x", 25)
    -- the right window of 20 ([21, 31]), then 25's own [15, 25] from [10, 20]'s count
    assert.same({ { "a@21", 25, "1" }, { "a@15", 25, "2" } }, ktv(out:read_all()))
    input:pipe("a", "x", 32)
    assert.same({ { "a@26", 32, "1" }, { "a@22", 32, "2" } }, ktv(out:read_all()))
    -- out of order: every window holding 23 counts it (at its newest record's time), 23
    -- gets [13, 23], and its right window [24, 34] starts from [22, 32]'s count
    input:pipe("a", "x", 23)
    assert.same({ { "a@22", 32, "3" }, { "a@21", 25, "2" }, { "a@15", 25, "3" },
                  { "a@13", 23, "2" }, { "a@24", 32, "2" } }, ktv(out:read_all()))
  end)

  it("count, for every window, the records within its bounds, in any order", function()
    local td = 50
    driver = testing.driver(counting(td, 100000))
    local input, out = driver:input("in"), driver:output("out")
    math.randomseed(42)
    local times = {}
    for i = 1, 300 do times[i] = 60 + math.random(0, 2000) end
    for i = 1, #times do input:pipe("k", "x", times[i]) end
    local final = {}
    for _, r in ipairs(out:read_all()) do final[r.key] = tonumber(r.value) end
    -- the windows Kafka Streams' algorithm keeps: each record t's [t - td, t], and
    -- [t + 1, t + 1 + td] when a later record falls there
    local want = {}
    local function count(s)
      local n = 0
      for _, t in ipairs(times) do if t >= s and t <= s + td then n = n + 1 end end
      return n
    end
    for _, t in ipairs(times) do
      want["k@" .. (t - td)] = count(t - td)
      local later = false
      for _, u in ipairs(times) do if u > t and u <= t + 1 + td then later = true end end
      if later then want["k@" .. (t + 1)] = count(t + 1) end
    end
    assert.same(want, final)
  end)

  it("put records before the difference into [0, difference]", function()
    driver = testing.driver(counting(10, 100))
    local input, out = driver:input("in"), driver:output("out")
    input:pipe("a", "x", 3)
    input:pipe("a", "x", 7)
    input:pipe("a", "x", 5)
    local final = {}
    for _, r in ipairs(out:read_all()) do final[r.key] = r.value end
    -- [0, 10] holds all three; 3's right window [4, 14] two, 5's right window [6, 16] one
    assert.same({ ["a@0"] = "3", ["a@4"] = "2", ["a@6"] = "1" }, final)
  end)

  it("drop a record whose window [t, t + difference] closed, and count it", function()
    driver = testing.driver(counting(10, 5))
    local input, out = driver:input("in"), driver:output("out")
    input:pipe("a", "x", 100)
    out:read_all()
    input:pipe("a", "x", 84) -- 84 + 10 < 100 - 5
    assert.same({}, out:read_all())
    assert.equal(1, dsl.stats(driver.app).dropped_late)
    -- 92 + 10 >= 95: taken, though its own [82, 92] closed: [90, 100] counts it, and its
    -- right window [93, 103] is made from that one
    input:pipe("a", "x", 92)
    assert.same({ { "a@90", 100, "2" }, { "a@93", 100, "1" } }, ktv(out:read_all()))
  end)

  it("emit one result per window once it closes, with emit = \"final\"", function()
    driver = testing.driver(counting(10, 0, { emit = "final" }))
    local input, out = driver:input("in"), driver:output("out")
    input:pipe("a", "x", 20)
    assert.same({}, out:read_all())
    input:pipe("a", "x", 25) -- [10, 20] closed (no grace)
    assert.same({ { "a@10", 20, "1" } }, ktv(out:read_all()))
    input:pipe("b", "x", 34) -- [15, 25] and [21, 31]
    assert.same({ { "a@15", 25, "2" }, { "a@21", 25, "1" } }, ktv(out:read_all()))
    input:pipe("b", "x", 60)
    assert.same({ { "b@24", 34, "1" } }, ktv(out:read_all()))
  end)

  it("are where emit = \"final\" belongs: a key's aggregation refuses it", function()
    local app = beck.app { id = "sliding" }
    local g = app:stream("in"):group_by_key()
    local ok, err = pcall(g.count, g, { emit = "final" })
    assert.is_false(ok)
    assert.matches("41%-dsl_sliding_spec.lua:%d+: count: emit = final is for windowed " ..
                   "aggregations", err)
    ok, err = pcall(g.reduce, g, function(a) return a end, { emit = "final" })
    assert.is_false(ok)
    assert.matches("reduce: emit = final is for windowed aggregations", err)
  end)

  it("refuse a retention shorter than twice the difference and the grace", function()
    local app = beck.app { id = "sliding" }
    local w = app:stream("in"):group_by_key():windowed_by(dsl.sliding(10):grace(5))
    local ok, err = pcall(w.count, w, { retention = 20 })
    assert.is_false(ok)
    assert.matches("41%-dsl_sliding_spec.lua:%d+: count: retention %(20 ms%) is shorter", err)
    ok, err = pcall(dsl.sliding, 0)
    assert.is_false(ok)
    assert.matches("sliding: expected a whole number of ms >= 1", err)
  end)
end)
