-- beck.dsl foreign-key table-table joins (Kafka Streams' KIP-213) through the test driver:
-- a left row joined with the right row its foreign key names, through the subscription and
-- response topics; foreign-key changes, deletions on either side, a right row that many
-- left rows share, left joins; bad extractors and declarations. (An answer made stale by a
-- later left update needs two tasks' timing: the parity harness's 4-partition runs.)
local beck = require "beck"
local testing = require "beck.testing"

local close_driver = require("spec.helpers").close_driver

local function kv(d, topic)
  local out = {}
  for _, r in ipairs(d:output(topic):read_all()) do
    out[#out + 1] = r.key .. "=" .. (r.value == nil and "nil" or r.value)
  end
  return out
end

local function customer(v) return v:match("^(%w+)") end

local function app_with(kind)
  local app = beck.app { id = "fk" }
  local orders = app:table("orders")
  local customers = app:table("customers")
  orders[kind](orders, customers, customer, function(o, c) return o .. " by " .. tostring(c) end)
        :to_stream():to("out")
  return app
end

describe("beck.dsl foreign-key joins", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("join each left row with the right row of its foreign key, and follow both sides",
     function()
    driver = testing.driver(app_with("join"))
    local orders, customers = driver:input("orders"), driver:input("customers")
    customers:pipe("c1", "ann")
    orders:pipe("o1", "c1 5")
    orders:pipe("o2", "c2 6") -- no right row: nothing
    assert.same({ "o1=c1 5 by ann" }, kv(driver, "out"))
    customers:pipe("c2", "bob")
    assert.same({ "o2=c2 6 by bob" }, kv(driver, "out"))
    customers:pipe("c1", "anna") -- every row that names c1
    orders:pipe("o3", "c1 1")
    assert.same({ "o1=c1 5 by anna", "o3=c1 1 by anna" }, kv(driver, "out"))
    -- a foreign key that changes: the old right row no longer reaches it
    orders:pipe("o1", "c2 7")
    assert.same({ "o1=c2 7 by bob" }, kv(driver, "out"))
    customers:pipe("c1", "x")
    assert.same({ "o3=c1 1 by x" }, kv(driver, "out"))
    customers:pipe("c2", nil) -- a right deletion deletes the results of its rows
    assert.same({ "o1=nil", "o2=nil" }, kv(driver, "out"))
    orders:pipe("o3", nil) -- a left deletion too
    assert.same({ "o3=nil" }, kv(driver, "out"))
    assert.is_nil(driver:store("fk_join-1-store"):get("o3"))
  end)

  it("keep left rows without a right row in a left join", function()
    driver = testing.driver(app_with("left_join"))
    local orders, customers = driver:input("orders"), driver:input("customers")
    orders:pipe("o1", "c1 5")
    assert.same({ "o1=c1 5 by nil" }, kv(driver, "out"))
    customers:pipe("c1", "ann")
    assert.same({ "o1=c1 5 by ann" }, kv(driver, "out"))
    orders:pipe("o1", "c2 5") -- the new key's answer alone (docs/dsl.md says why)
    assert.same({ "o1=c2 5 by nil" }, kv(driver, "out"))
    customers:pipe("c1", "anna") -- o1 no longer follows c1
    assert.same({}, kv(driver, "out"))
    customers:pipe("c2", "bob")
    customers:pipe("c2", nil)
    assert.same({ "o1=c2 5 by bob", "o1=c2 5 by nil" }, kv(driver, "out"))
    orders:pipe("o1", nil)
    assert.same({ "o1=nil" }, kv(driver, "out"))
  end)

  it("treat a nil foreign key as no right row (left) or no result (inner)", function()
    local app = beck.app { id = "fk" }
    local t, c = app:table("orders"), app:table("customers")
    local fk = function(v) if v ~= "none" then return v end end
    t:left_join(c, fk, function(o, r) return o .. "/" .. tostring(r) end):to_stream():to("l")
    t:join(c, fk, function(o, r) return o .. "/" .. tostring(r) end):to_stream():to("i")
    driver = testing.driver(app)
    driver:input("customers"):pipe("c1", "ann")
    driver:input("orders"):pipe("o1", "none")
    driver:input("orders"):pipe("o2", "c1")
    assert.same({ "o1=none/nil", "o2=c1/ann" }, kv(driver, "l"))
    assert.same({ "o2=c1/ann" }, kv(driver, "i"))
  end)

  it("is refused where it cannot be, at the topology's line", function()
    local app = beck.app { id = "fk" }
    local t, c = app:table("orders"), app:table("customers")
    local ok, err = pcall(t.outer_join, t, c, customer, function() end)
    assert.is_false(ok)
    assert.matches("42%-dsl_fkjoin_spec.lua:%d+: outer_join", err)
    ok, err = pcall(t.join, t, c, customer, "nope")
    assert.is_false(ok)
    assert.matches("42%-dsl_fkjoin_spec.lua:%d+: join: expected an options table, got string", err)
  end)

  it("fails a record whose extractor raises, saying which", function()
    local app = beck.app { id = "fk" }
    local t, c = app:table("orders"), app:table("customers")
    t:join(c, function() error("no customer field") end, function(o) return o end)
     :to_stream():to("out")
    driver = testing.driver(app)
    local ok, err = pcall(function() driver:input("orders"):pipe("o1", "x") end)
    assert.is_false(ok)
    assert.matches("no customer field", err)
    assert.matches("orders", err)
  end)

  -- Kafka Streams' KIP-213 join holds its subscriptions keyed by the foreign key and its
  -- left rows by the left key: a repartition of either side's subtopology (each in turn,
  -- to more tasks and to fewer) moves them by key group, and no result goes stale.
  for _, kind in ipairs { "join", "left_join" } do
    it(kind .. " keeps every result right across repartitions of each subtopology", function()
      driver = testing.driver(app_with(kind), { partitions = 4, cache_max_bytes = 0 })
      local orders, customers = driver:input("orders"), driver:input("customers")
      local left, right = {}, {}
      math.randomseed(42)
      local function round(n)
        for _ = 1, n do
          if math.random() < 0.6 then
            local k, v = "o" .. math.random(60), nil
            if math.random() >= 0.1 then v = "c" .. math.random(12) .. " " .. math.random(9) end
            orders:pipe(k, v)
            left[k] = v
          else
            local k, v = "c" .. math.random(12), nil
            if math.random() >= 0.15 then v = "name" .. math.random(99) end
            customers:pipe(k, v)
            right[k] = v
          end
        end
      end
      local latest = {}
      local function check(when)
        for _, r in ipairs(driver:output("out"):read_all()) do latest[r.key] = r.value end
        for k = 1, 60 do
          local key, want = "o" .. k, nil
          local o = left[key]
          if o then
            local c = right[customer(o)]
            if c or kind == "left_join" then want = o .. " by " .. tostring(c) end
          end
          assert.equal(want, latest[key], when .. ": " .. key)
        end
      end
      round(300)
      check("before")
      local nsub = #driver.plan.subtopologies
      assert.is_true(nsub >= 2, "the join spans subtopologies")
      for s = 0, nsub - 1 do
        driver:repartition(s, 7)
        round(120)
        check("subtopology " .. s .. " at 7 tasks")
        driver:repartition(s, 2)
        round(120)
        check("subtopology " .. s .. " at 2 tasks")
      end
    end)
  end
end)
