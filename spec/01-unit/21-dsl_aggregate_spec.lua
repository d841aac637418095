-- beck.dsl groupings, aggregations (count, reduce, aggregate) and tables
-- (app:table, filter, map_values, to_stream, to_table) through the test
-- driver: repartitioning when the key changed, per-key placement over
-- several partitions, and tombstones.
local beck = require "beck"
local testing = require "beck.testing"
local cjson = require "cjson"

local kvs = require("spec.helpers").kvs
local close_driver = require("spec.helpers").close_driver

local rows = require("spec.helpers").rows

local function this_line()
  return debug.getinfo(2, "l").currentline
end

describe("beck.dsl aggregations", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  describe("grouping", function()
    it("group_by_key without a key change reads the input's partitions", function()
      local app = beck.app { id = "g1" }
      app:stream("in"):group_by_key():count { store = "n" }:to("out")
      driver = testing.driver(app, { partitions = 4 })
      driver:input("in"):pipe_list { { "a", "x" }, { "b", "y" }, { "a", "z" } }
      assert.same({ { "a", "1" }, { "b", "1" }, { "a", "2" } },
                  kvs(driver:output("out"):read_all()))
      local plan = app:describe()
      assert.equal(1, #plan.subtopologies)
      assert.is_nil(plan.topic_index["g1-n-repartition"])
    end)

    it("group_by_key after a key change goes through <app>-<store>-repartition", function()
      local app = beck.app { id = "g2" }
      app:stream("in"):map(function(_, v) return v, v end):group_by_key():count { store = "n" }
         :to("out")
      driver = testing.driver(app, { partitions = 4 })
      local words = { "a", "b", "c", "d", "e", "f", "g", "h", "a", "b", "a" }
      for i, w in ipairs(words) do driver:input("in"):pipe("line-" .. i, w) end
      local plan = app:describe()
      assert.equal(2, #plan.subtopologies)
      local rep = driver:output("g2-n-repartition"):read_all()
      assert.equal(#words, #rep)
      -- each word is counted by one task only: never on the wrong partition
      local all = rows(driver:store("n"):all())
      assert.equal(8, #all)
      assert.equal("3", driver:store("n"):get("a"))
      local part_of = {}
      for _, r in ipairs(rep) do
        part_of[r.key] = part_of[r.key] or r.partition
        assert.equal(part_of[r.key], r.partition)
      end
      local out = driver:output("out"):read_key_values()
      assert.same({ a = "3", b = "2", c = "1", d = "1", e = "1", f = "1", g = "1", h = "1" }, out)
    end)

    it("names the repartition topic after the grouping, the store or the processor", function()
      local app = beck.app { id = "g3" }
      local s = app:stream("in"):select_key(function(_, v) return v end)
      s:group_by_key { name = "by-word" }:count():to("o1")
      s:group_by_key():count { store = "st" }:to("o2")
      s:group_by_key():count():to("o3")
      local plan = app:describe()
      assert.truthy(plan.topic_index["g3-by-word-repartition"])
      assert.truthy(plan.topic_index["g3-st-repartition"])
      assert.truthy(plan.topic_index["g3-count-3-repartition"])
      assert.truthy(plan.store_index["count-1-store"])
      assert.truthy(plan.store_index["count-3-store"])
    end)

    it("group_by(fn) always repartitions, and drops records whose new key is nil", function()
      local app = beck.app { id = "g4" }
      app:stream("in"):group_by(function(_, v) return v ~= "" and v:sub(1, 1) or nil end)
         :count { store = "by-letter" }:to("out")
      driver = testing.driver(app, { partitions = 2 })
      driver:input("in"):pipe_list { { "1", "apple" }, { "2", "avocado" }, { "3", "" },
                                     { "4", "banana" } }
      assert.same({ a = "2", b = "1" }, driver:output("out"):read_key_values())
      assert.equal(3, #driver:output("g4-by-letter-repartition"):read_all())
    end)

    it("two aggregations of one grouping share its repartition topic", function()
      local app = beck.app { id = "g5" }
      local g = app:stream("in"):select_key(function(_, v) return v end):group_by_key()
      g:count { store = "c" }:to("counts")
      g:reduce(function(a, v) return a .. v end, { store = "r" }):to("concat")
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "1", "x" }, { "2", "x" } }
      assert.same({ x = "2" }, driver:output("counts"):read_key_values())
      assert.same({ x = "xx" }, driver:output("concat"):read_key_values())
      local plan = app:describe()
      local reps = 0
      for _, t in ipairs(plan.topics) do
        if t.name:match("%-repartition$") then reps = reps + 1 end
      end
      assert.equal(1, reps)
    end)
  end)

  describe("count, reduce, aggregate", function()
    it("count keeps numbers in its store and forwards them", function()
      local app = beck.app { id = "a1" }
      local forwarded = {}
      app:stream("in"):group_by_key():count { store = "c" }:to_stream()
         :peek(function(k, n) forwarded[#forwarded + 1] = { k, n } end):to("out")
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "a", "1" }, { "a", "2" }, { "b", "3" } }
      assert.same({ { "a", 1 }, { "a", 2 }, { "b", 1 } }, forwarded)
      assert.same({ { "a", "2" }, { "b", "1" } }, rows(driver:store("c"):all()))
    end)

    it("drops records without a key or a value (tombstones), as Kafka Streams", function()
      local app = beck.app { id = "a2" }
      app:stream("in"):group_by_key():count { store = "c" }:to("out")
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { nil, "x" }, { "a", nil }, { "a", "y" } }
      assert.same({ { "a", "1" } }, kvs(driver:output("out"):read_all()))
    end)

    it("reduce: the first value is the aggregate, then fn(agg, value)", function()
      local app = beck.app { id = "a3" }
      app:stream("in"):group_by_key()
         :reduce(function(agg, v) return tonumber(agg) + tonumber(v) end, { store = "sum" })
         :to("out")
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "a", "2" }, { "a", "3" }, { "b", "10" }, { "a", "0.5" } }
      assert.same({ { "a", "2" }, { "a", "5" }, { "b", "10" }, { "a", "5.5" } },
                  kvs(driver:output("out"):read_all()))
      assert.equal("5.5", driver:store("sum"):get("a"))
    end)

    it("aggregate(init, adder) with a JSON aggregate in its store", function()
      local app = beck.app { id = "a4" }
      app:stream("in", { value_serde = "json" }):group_by_key()
         :aggregate(function() return { n = 0, total = 0 } end, function(_, order, agg)
           agg.n = agg.n + 1
           agg.total = agg.total + order.amount
           return agg
         end, { store = "totals", value_serde = "json" })
         :to("out", { value_serde = "json" })
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "c1", '{"amount":10}' }, { "c1", '{"amount":2.5}' },
                                     { "c2", '{"amount":1}' } }
      local out = driver:output("out"):read_all()
      assert.same({ n = 2, total = 12.5 }, cjson.decode(out[2].value))
      assert.same({ n = 1, total = 1 }, cjson.decode(driver:store("totals"):get("c2")))
    end)

    it("aggregate to nil deletes the key", function()
      local app = beck.app { id = "a5" }
      app:stream("in"):group_by_key()
         :aggregate(0, function(_, v, agg)
           if v == "reset" then return nil end
           return agg + 1
         end, { store = "n" })
         :to("out")
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "a", "x" }, { "a", "x" }, { "a", "reset" }, { "a", "x" } }
      assert.same({ { "a", "1" }, { "a", "2" }, { "a", nil }, { "a", "1" } },
                  kvs(driver:output("out"):read_all()))
    end)

    it("refuses a table as the initial aggregate, at the topology's line", function()
      local app = beck.app { id = "a6" }
      local line = this_line() + 2
      local ok, err = pcall(function()
        app:stream("in"):group_by_key():aggregate({}, function(_, _, a) return a end)
      end)
      assert.is_false(ok)
      assert.matches("21%-dsl_aggregate_spec.lua:" .. line .. ": aggregate: give the initial " ..
                     "aggregate as a function", err)
    end)

    it("counts with the cache off as with it on", function()
      for _, cache in ipairs { 0, 1024 * 1024 } do
        local app = beck.app { id = "a7" }
        app:stream("in"):map(function(_, v) return v, v end):group_by_key():count { store = "c" }
           :to("out")
        driver = testing.driver(app, { cache_max_bytes = cache, partitions = 2 })
        for i = 1, 20 do driver:input("in"):pipe(tostring(i), "w" .. (i % 3)) end
        assert.same({ w0 = "6", w1 = "7", w2 = "7" }, driver:output("out"):read_key_values())
        driver:close()
        driver = nil
      end
    end)
  end)

  describe("tables", function()
    it("app:table keeps the latest value per key; a tombstone deletes it", function()
      local app = beck.app { id = "t1" }
      app:table("users", { store = "users" }):to_stream():to("changes")
      driver = testing.driver(app)
      local users = driver:input("users")
      users:pipe("u1", "alice")
      users:pipe("u2", "bob")
      users:pipe("u1", "alicia")
      users:pipe("u2", nil)
      users:pipe(nil, "no key")
      assert.same({ { "u1", "alicia" } }, rows(driver:store("users"):all()))
      assert.same({ { "u1", "alice" }, { "u2", "bob" }, { "u1", "alicia" }, { "u2", nil } },
                  kvs(driver:output("changes"):read_all()))
    end)

    it("filter turns a row that stops matching into a deletion downstream", function()
      local app = beck.app { id = "t2" }
      app:table("scores"):filter(function(_, v) return tonumber(v) >= 10 end):to("high")
      driver = testing.driver(app)
      driver:input("scores"):pipe_list { { "a", "12" }, { "b", "3" }, { "a", "5" },
                                         { "b", "30" }, { "b", nil } }
      assert.same({ { "a", "12" }, { "b", nil }, { "a", nil }, { "b", "30" }, { "b", nil } },
                  kvs(driver:output("high"):read_all()))
    end)

    it("filter_not and map_values, materialized when given a store", function()
      local app = beck.app { id = "t3" }
      app:table("scores"):filter_not(function(_, v) return v == "0" end)
         :map_values(function(v, k) return k .. "=" .. v end, { store = "labels" })
         :to("out")
      driver = testing.driver(app)
      driver:input("scores"):pipe_list { { "a", "1" }, { "b", "0" }, { "a", nil } }
      assert.same({ { "a", "a=1" }, { "b", nil }, { "a", nil } },
                  kvs(driver:output("out"):read_all()))
      driver:input("scores"):pipe("c", "7")
      assert.same({ { "c", "c=7" } }, rows(driver:store("labels"):all()))
    end)

    it("to_table keeps a stream's latest value per key, repartitioned by a new key", function()
      local app = beck.app { id = "t4" }
      app:stream("in"):select_key(function(_, v) return v:sub(1, 1) end)
         :to_table { store = "latest" }:to("out")
      driver = testing.driver(app, { partitions = 2 })
      driver:input("in"):pipe_list { { "1", "apple" }, { "2", "avocado" }, { "3", "banana" } }
      assert.equal("avocado", driver:store("latest"):get("a"))
      assert.equal("banana", driver:store("latest"):get("b"))
      assert.truthy(app:describe().topic_index["t4-to_table-1-repartition"])
    end)

    it("a table from an aggregation is a table: filter, map_values, to", function()
      local app = beck.app { id = "t5" }
      app:stream("in"):group_by_key():count()
         :filter(function(_, n) return n % 2 == 0 end)
         :map_values(function(n) return n * 10 end)
         :to("even")
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "a", "x" }, { "a", "x" }, { "a", "x" } }
      assert.same({ { "a", nil }, { "a", "20" }, { "a", nil } },
                  kvs(driver:output("even"):read_all()))
    end)
  end)

  describe("tables re-grouped", function()
    -- users -> region; a user who moves leaves the old region's count
    local function regions(id, build)
      local app = beck.app { id = id }
      local t = app:table("users"):group_by(function(_, region) return region, region end)
      build(t):to_stream():to("out")
      driver = testing.driver(app, { partitions = 3 })
      return driver:input("users"), driver:output("out")
    end

    it("count: an update leaves its old group and joins its new one", function()
      local users, out = regions("rg1", function(g) return g:count() end)
      users:pipe("u1", "eu")
      users:pipe("u2", "eu")
      users:pipe("u1", "us")       -- moves: eu down first, then us up
      users:pipe("u2", "eu")       -- same group: one change, one update
      users:pipe_list { { "u2", nil } } -- leaves: eu down to 0, kept at 0
      users:pipe_list { { "u9", nil } } -- a row that never was: nothing
      assert.same({ { "eu", "1" }, { "eu", "2" }, { "eu", "1" }, { "us", "1" }, { "eu", "1" },
                    { "eu", "0" } }, kvs(out:read_all()))
      assert.truthy(driver.app:describe().topic_index["rg1-table_group_by-1-repartition"])
    end)

    it("reduce with an adder and a subtractor, and aggregate from init", function()
      local app = beck.app { id = "rg2" }
      local g = app:table("scores"):group_by(function(k, v) return k:sub(1, 1), v end)
      g:reduce(function(a, v) return tostring(tonumber(a) + tonumber(v)) end,
               function(a, v) return tostring(tonumber(a) - tonumber(v)) end,
               { name = "sum" }):to("sums")
      g:aggregate(function() return "" end,
                  function(_, v, agg) return agg .. "+" .. v end,
                  function(_, v, agg) return agg .. "-" .. v end, { name = "log" }):to("logs")
      driver = testing.driver(app, { partitions = 2 })
      local scores = driver:input("scores")
      scores:pipe("a1", "5")
      scores:pipe("a2", "7")
      scores:pipe("a1", "6")       -- a: 12 - 5 + 6
      scores:pipe("b1", "1")
      assert.same({ { "a", "5" }, { "a", "12" }, { "a", "13" }, { "b", "1" } },
                  kvs(driver:output("sums"):read_all()))
      assert.same({ { "a", "+5" }, { "a", "+5+7" }, { "a", "+5+7-5+6" }, { "b", "+1" } },
                  kvs(driver:output("logs"):read_all()))
    end)

    it("a row whose selector gives no key joins no group", function()
      local app = beck.app { id = "rg3" }
      app:table("users"):group_by(function(_, v)
        if v == "none" then return nil, v end
        return v, v
      end):count():to("out")
      driver = testing.driver(app)
      local u = driver:input("users")
      u:pipe("u1", "none")
      u:pipe("u1", "eu")           -- from no group into eu
      u:pipe("u1", "none")         -- out of eu, into no group
      assert.same({ { "eu", "1" }, { "eu", "0" } }, kvs(driver:output("out"):read_all()))
    end)

    it("refuses a selector that is not a function, at the topology's line", function()
      local app = beck.app { id = "rg5" }
      local ok, err = pcall(function() app:table("t"):group_by("region") end)
      assert.is_false(ok)
      assert.matches("table group_by: expected a function", err)
      assert.matches("21%-dsl_aggregate_spec.lua:%d+", err)
    end)
  end)
end)
