-- scripts/examples/pageviews.lua through the test driver: page views per
-- user per minute (a DSL windowed aggregation), with window boundaries,
-- grace and late records, re-keying through the repartition topic, and bad
-- input dead-lettered.
local testing = require "beck.testing"
local dsl = require "beck.dsl"
local cjson = require "cjson"
local close_driver = require("spec.helpers").close_driver

local TOPOLOGY = "scripts/examples/pageviews.lua"
local MIN = 60000
local T0 = 1700000040000 -- a minute boundary

local function view(user, page)
  return cjson.encode { user = user, page = page or "/home" }
end

local function decoded(records)
  local list = {}
  for i, r in ipairs(records) do
    local v = cjson.decode(r.value)
    list[i] = { r.key, v.views, v.start, v["end"], v.user }
  end
  return list
end

describe("examples/pageviews.lua", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("counts views per user per minute, keyed user@window start", function()
    driver = testing.driver(TOPOLOGY)
    local views = driver:input("pageviews")
    views:pipe("/home", view("alice"), T0)
    views:pipe("/cart", view("alice", "/cart"), T0 + MIN - 1) -- last ms of the minute
    views:pipe("/home", view("bob"), T0 + 5)
    views:pipe("/home", view("alice"), T0 + MIN)              -- first ms of the next
    local a, b = "alice@" .. T0, "bob@" .. T0
    local a2 = "alice@" .. (T0 + MIN)
    assert.same({ { a, 1, T0, T0 + MIN, "alice" }, { a, 2, T0, T0 + MIN, "alice" },
                  { b, 1, T0, T0 + MIN, "bob" }, { a2, 1, T0 + MIN, T0 + 2 * MIN, "alice" } },
                decoded(driver:output("pageviews-per-minute"):read_all()))
    assert.equal("2", driver:store("views-per-minute"):get(dsl.window_key("alice", T0)))
  end)

  it("takes views up to 10 s after the minute, drops and counts later ones", function()
    driver = testing.driver(TOPOLOGY)
    local views, out = driver:input("pageviews"), driver:output("pageviews-per-minute")
    views:pipe("/", view("alice"), T0 + 10)
    views:pipe("/", view("carol"), T0 + MIN + 9999) -- stream time: 9.999 s into the next minute
    views:pipe("/", view("alice"), T0 + 20)         -- in grace: counted
    assert.same({ { "alice@" .. T0, 1 }, { "carol@" .. (T0 + MIN), 1 }, { "alice@" .. T0, 2 } },
                (function()
                  local l = {}
                  for i, r in ipairs(decoded(out:read_all())) do l[i] = { r[1], r[2] } end
                  return l
                end)())
    views:pipe("/", view("carol"), T0 + MIN + 10000) -- the first minute closes
    views:pipe("/", view("alice"), T0 + 30)          -- late: dropped
    local recs = decoded(out:read_all())
    assert.equal(1, #recs)
    assert.equal("carol@" .. (T0 + MIN), recs[1][1])
    assert.equal(1, dsl.stats(driver.app).dropped_late)
    assert.equal("2", driver:store("views-per-minute"):get(dsl.window_key("alice", T0)))
  end)

  it("re-keys views by user through the repartition topic, one task per user", function()
    driver = testing.driver(TOPOLOGY, { partitions = 4 })
    local views = driver:input("pageviews")
    local users = { "ann", "bob", "cat", "dan", "eve", "fay" }
    for i = 1, 24 do
      local u = users[i % #users + 1]
      views:pipe("/page" .. i, view(u, "/page" .. i), T0 + i * 1000)
    end
    local through = driver:output("pageviews-views-per-minute-repartition"):read_all()
    assert.equal(24, #through)
    local part_of = {}
    for _, r in ipairs(through) do
      part_of[r.key] = part_of[r.key] or r.partition
      assert.equal(part_of[r.key], r.partition, "user " .. r.key .. " in two partitions")
    end
    local counts = driver:output("pageviews-per-minute"):read_key_values()
    for _, u in ipairs(users) do
      assert.equal(4, cjson.decode(counts[u .. "@" .. T0]).views)
    end
    -- each user's window is in exactly one task's store
    local n = 0
    for k in driver:store("views-per-minute"):all() do
      if dsl.parse_window_key(k) then n = n + 1 end
    end
    assert.equal(#users, n)
  end)

  it("dead-letters views that are not JSON or have no user", function()
    driver = testing.driver(TOPOLOGY)
    local views = driver:input("pageviews")
    views:pipe("/", "{oops", T0)
    views:pipe("/", '{"page":"/"}', T0)
    views:pipe("/", view("alice"), T0)
    local dead = driver:output("pageviews-dlq"):read_all()
    assert.equal(2, #dead)
    assert.matches("topic pageviews: value: not JSON", dead[1].headers["beck.error"])
    assert.matches("not a view with a user", dead[2].headers["beck.error"])
    assert.equal(1, #driver:output("pageviews-per-minute"):read_all())
  end)
end)
