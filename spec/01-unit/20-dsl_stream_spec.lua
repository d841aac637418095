-- beck.dsl streams through the test driver: one case per stateless
-- operation, branches and merges, to(), repartition(), the names the DSL
-- gives nodes, and its errors at the topology's line.
local beck = require "beck"
local dsl = require "beck.dsl"
local testing = require "beck.testing"

local kvs = require("spec.helpers").kvs
local close_driver = require("spec.helpers").close_driver

local function this_line()
  return debug.getinfo(2, "l").currentline
end

describe("beck.dsl streams", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  -- run(build, records [, config]): builds an app with build(app), pipes
  -- records { key, value [, ts] } into "in" and returns the driver.
  local function run(build, records, config)
    local app = beck.app { id = "dsl-stream" }
    build(app)
    driver = testing.driver(app, config)
    driver:input("in"):pipe_list(records or {})
    return driver
  end

  it("runs the example of DESIGN.md verbatim", function()
    local function pairs_of(word, n)
      return { word, n }
    end
    local app = beck.app { id = "wordcount" }
    app:stream("text-lines")
       :flat_map(function(k, line)
         local out = {}
         for w in line:lower():gmatch("%a+") do out[#out + 1] = pairs_of(w, 1) end
         return out
       end)
       :group_by_key()
       :count { store = "counts" }
       :to("word-counts")
    driver = testing.driver(app, { partitions = 3 })
    driver:input("text-lines"):pipe("l1", "the cat and the hat")
    driver:input("text-lines"):pipe("l2", "The end")
    assert.same({ the = "3", cat = "1", ["and"] = "1", hat = "1", ["end"] = "1" },
                driver:output("word-counts"):read_key_values())
    assert.equal("3", driver:store("counts"):get("the"))
    -- the words went through the repartition topic the grouping asked for
    assert.equal(7, #driver:output("wordcount-counts-repartition"):read_all())
  end)

  it("filter and filter_not", function()
    run(function(app)
      local s = app:stream("in")
      s:filter(function(k, v) return v:match("^a") ~= nil end):to("yes")
      s:filter_not(function(_, v) return v:match("^a") ~= nil end):to("no")
    end, { { "1", "apple" }, { "2", "pear" }, { "3", "avocado" } })
    assert.same({ { "1", "apple" }, { "3", "avocado" } }, kvs(driver:output("yes"):read_all()))
    assert.same({ { "2", "pear" } }, kvs(driver:output("no"):read_all()))
  end)

  it("map changes key and value", function()
    run(function(app)
      app:stream("in"):map(function(k, v) return v, k end):to("out")
    end, { { "k1", "v1" }, { nil, "v2" } })
    assert.same({ { "v1", "k1" }, { "v2", nil } }, kvs(driver:output("out"):read_all()))
  end)

  it("map_values gets the value first, then the key", function()
    run(function(app)
      app:stream("in"):map_values(function(v, k) return v:upper() .. "/" .. k end):to("out")
    end, { { "a", "x" }, { "b", "y" } })
    assert.same({ { "a", "X/a" }, { "b", "Y/b" } }, kvs(driver:output("out"):read_all()))
  end)

  it("flat_map: an array of { key, value } pairs, or emit(key, value)", function()
    run(function(app)
      local s = app:stream("in")
      s:flat_map(function(k, v)
        local out = {}
        for c in v:gmatch(".") do out[#out + 1] = { c, k } end
        return out
      end):to("pairs")
      s:flat_map(function(k, v, emit)
        for c in v:gmatch(".") do emit(k .. c, c) end
      end):to("emitted")
      s:flat_map(function() return nil end):to("none")
    end, { { "k", "ab" }, { "j", "" } })
    assert.same({ { "a", "k" }, { "b", "k" } }, kvs(driver:output("pairs"):read_all()))
    assert.same({ { "ka", "a" }, { "kb", "b" } }, kvs(driver:output("emitted"):read_all()))
    assert.is_true(driver:output("none"):is_empty())
  end)

  it("flat_map names its line when fn returns something else", function()
    local line
    local app = beck.app { id = "bad-flat-map" }
    line = this_line() + 1
    app:stream("in"):flat_map(function() return "oops" end):to("out")
    driver = testing.driver(app)
    local input = driver:input("in")
    local ok, err = pcall(input.pipe, input, "k", "v")
    assert.is_false(ok)
    assert.matches("flat_map %(.*20%-dsl_stream_spec.lua:" .. line ..
                   "%): expected an array of { key, value } pairs, got string", err)
  end)

  it("flat_map_values: an array of values, or emit(value)", function()
    run(function(app)
      local s = app:stream("in")
      s:flat_map_values(function(v) return { v, v .. v } end):to("list")
      s:flat_map_values(function(v, k, emit) emit(k .. v) end):to("emitted")
    end, { { "k", "x" } })
    assert.same({ { "k", "x" }, { "k", "xx" } }, kvs(driver:output("list"):read_all()))
    assert.same({ { "k", "kx" } }, kvs(driver:output("emitted"):read_all()))
  end)

  it("select_key, peek and foreach", function()
    local peeked, seen = {}, {}
    run(function(app)
      local s = app:stream("in")
                   :select_key(function(_, v) return v:sub(1, 1) end)
                   :peek(function(k, v) peeked[#peeked + 1] = k .. "=" .. v end)
      s:to("out")
      s:foreach(function(k, v) seen[#seen + 1] = k .. ":" .. v end)
    end, { { "1", "apple" }, { "2", "banana" } })
    assert.same({ { "a", "apple" }, { "b", "banana" } }, kvs(driver:output("out"):read_all()))
    assert.same({ "a=apple", "b=banana" }, peeked)
    assert.same({ "a:apple", "b:banana" }, seen)
  end)

  it("split sends a record to the first branch that takes it, or the default", function()
    run(function(app)
      local b = app:stream("in"):split()
                   :branch("small", function(_, v) return #v < 4 end)
                   :branch("medium", function(_, v) return #v < 8 end)
                   :default_branch("large")
      b.small:to("small")
      b.medium:to("medium")
      b.large:to("large")
    end, { { "1", "fig" }, { "2", "apple" }, { "3", "pineapple" }, { "4", "kiwi" } })
    assert.same({ { "1", "fig" } }, kvs(driver:output("small"):read_all()))
    assert.same({ { "2", "apple" }, { "4", "kiwi" } }, kvs(driver:output("medium"):read_all()))
    assert.same({ { "3", "pineapple" } }, kvs(driver:output("large"):read_all()))
  end)

  it("split without a default drops what no branch takes; branch() lists streams", function()
    run(function(app)
      local s = app:stream("in")
      local b = s:split():branch(function(_, v) return v == "x" end):no_default_branch()
      b["1"]:to("x")
      local list = s:branch(function(_, v) return v == "y" end, function() return true end)
      list[1]:to("y")
      list[2]:to("rest")
    end, { { "1", "x" }, { "2", "y" }, { "3", "z" } })
    assert.same({ { "1", "x" } }, kvs(driver:output("x"):read_all()))
    assert.same({ { "2", "y" } }, kvs(driver:output("y"):read_all()))
    assert.same({ { "1", "x" }, { "3", "z" } }, kvs(driver:output("rest"):read_all()))
  end)

  it("merge puts streams together", function()
    local app = beck.app { id = "dsl-merge" }
    local a = app:stream("in")
    local b = app:stream("in2"):map_values(function(v) return v .. "!" end)
    a:merge(b):to("out")
    driver = testing.driver(app)
    driver:input("in"):pipe("k1", "a")
    driver:input("in2"):pipe("k2", "b")
    assert.same({ { "k1", "a" }, { "k2", "b!" } }, kvs(driver:output("out"):read_all()))
    -- both inputs now feed one subtopology
    assert.equal(1, #app:describe().subtopologies)
  end)

  it("to(fn) routes each record to one of the topics it lists", function()
    run(function(app)
      app:stream("in"):to(function(k) return "out-" .. k end, { topics = { "out-a", "out-b" } })
    end, { { "a", "1" }, { "b", "2" }, { "a", "3" } })
    assert.same({ { "a", "1" }, { "a", "3" } }, kvs(driver:output("out-a"):read_all()))
    assert.same({ { "b", "2" } }, kvs(driver:output("out-b"):read_all()))
    local input = driver:input("in")
    local ok, err = pcall(input.pipe, input, "c", "4")
    assert.is_false(ok)
    assert.matches("returned topic out%-c, not one of out%-a, out%-b", err)
  end)

  it("to() writes numbers and booleans as text; a table needs a serde", function()
    local line
    run(function(app)
      local s = app:stream("in")
      s:map_values(function(v) return #v end):to("lengths")
      s:map_values(function(v) return v == "yes" end):to("flags")
      line = this_line() + 1
      s:map_values(function(v) return { v } end):to("tables")
    end)
    local input = driver:input("in")
    local ok, err = pcall(input.pipe, input, "k", "yes")
    assert.same({ { "k", "3" } }, kvs(driver:output("lengths"):read_all()))
    assert.same({ { "k", "true" } }, kvs(driver:output("flags"):read_all()))
    assert.is_false(ok)
    assert.matches("to tables %(.*20%-dsl_stream_spec.lua:" .. line .. "%): value: the string " ..
                   "serde cannot write a table; give a serde such as value_serde = \"json\"", err)
  end)

  it("repartition() writes through <app>-<name>-repartition by the new key", function()
    run(function(app)
      app:stream("in"):select_key(function(_, v) return v end)
         :repartition { name = "by-value" }
         :peek(function() end):to("out")
    end, { { "1", "x" }, { "2", "y" }, { "3", "x" } }, { partitions = 4 })
    local through = driver:output("dsl-stream-by-value-repartition"):read_all()
    assert.same({ { "x", "x" }, { "y", "y" }, { "x", "x" } }, kvs(through))
    local out = driver:output("out"):read_all()
    assert.same({ { "x", "x" }, { "y", "y" }, { "x", "x" } }, kvs(out))
    -- the same key lands in the same partition of the repartition topic
    assert.equal(through[1].partition, through[3].partition)
    local plan = driver.app:describe()
    local t = plan.topics[plan.topic_index["dsl-stream-by-value-repartition"]]
    assert.is_true(t.internal and t.source and t.sink)
    assert.equal(2, #plan.subtopologies)
  end)

  it("process() plugs in a processor of the processor API, with its stores", function()
    run(function(app)
      app:stream("in"):process({
        init = function(ctx) ctx.seen = ctx:store("seen") end,
        process = function(ctx, k, v)
          if not ctx.seen:get(v) then
            ctx.seen:put(v, k)
            ctx:forward(k, v)
          end
        end,
      }, { stores = { "seen" } }):to("first")
    end, { { "1", "x" }, { "2", "x" }, { "3", "y" } })
    assert.same({ { "1", "x" }, { "3", "y" } }, kvs(driver:output("first"):read_all()))
    assert.equal("1", driver:store("seen"):get("x"))
  end)

  describe("names", function()
    it("are <op>-<n> per kind of operation, or the user's", function()
      local app = beck.app { id = "names" }
      local s = app:stream("in")
      s:filter(function() return true end):map_values(function(v) return v end)
       :filter(function() return true end, { name = "keep" }):filter(function() return true end)
       :to("out")
      local names = {}
      for _, n in ipairs(app.order) do names[#names + 1] = n.name end
      assert.same({ "source-1", "filter-1", "map_values-1", "keep", "filter-2", "to-1",
                    "to-1-sink" }, names)
    end)

    it("are the same for the same topology, every time it loads", function()
      local function build()
        local app = beck.app { id = "same" }
        app:stream("in"):map(function(k, v) return v, k end):group_by_key():count():to("out")
        local names = {}
        for _, n in ipairs(app.order) do names[#names + 1] = n.name end
        local plan = app:describe()
        for _, t in ipairs(plan.topics) do names[#names + 1] = t.name end
        for _, st in ipairs(plan.stores) do names[#names + 1] = st.changelog end
        return names
      end
      local a = build()
      assert.same(a, build())
      assert.truthy(table.concat(a, " "):find("same-count-1-repartition", 1, true))
      assert.truthy(table.concat(a, " "):find("same-count-1-store-changelog", 1, true))
    end)

    it("a node's line is the topology's, in errors about it", function()
      local app = beck.app { id = "dup" }
      local line = this_line() + 1
      app:stream("in"):filter(function() return true end, { name = "f" })
      local ok, err = pcall(function()
        app:stream("in2"):filter(function() return true end, { name = "f" })
      end)
      assert.is_false(ok)
      assert.matches("20%-dsl_stream_spec.lua:%d+: filter: a node named 'f' is already declared " ..
                     "at .*20%-dsl_stream_spec.lua:" .. line, err)
    end)
  end)

  describe("errors at the topology's line", function()
    it("a function that is not one", function()
      local app = beck.app { id = "e1" }
      local line = this_line() + 1
      local ok, err = pcall(function() app:stream("in"):filter("nope") end)
      assert.is_false(ok)
      assert.matches("20%-dsl_stream_spec.lua:" .. line .. ": filter: expected a function, got " ..
                     "string", err)
    end)

    it("a bad topic name", function()
      local app = beck.app { id = "e2" }
      local line = this_line() + 1
      local ok, err = pcall(function() app:stream("bad topic") end)
      assert.is_false(ok)
      assert.matches("20%-dsl_stream_spec.lua:" .. line .. ": source 'source%-1': bad topic name",
                     err)
    end)

    it("a stream added after the topology was described", function()
      local app = beck.app { id = "e3" }
      local s = app:stream("in")
      s:to("out")
      app:describe()
      local ok, err = pcall(function() s:filter(function() return true end) end)
      assert.is_false(ok)
      assert.matches("was already described", err)
    end)

    it("to(fn) without its topics", function()
      local app = beck.app { id = "e4" }
      local ok, err = pcall(function() app:stream("in"):to(function() return "x" end) end)
      assert.is_false(ok)
      assert.matches("to: a function needs { topics = { ... } }", err, 1, true)
    end)
  end)
end)
