-- beck.dsl joins through the test driver: stream-table (inner, left),
-- table-table (inner, left, outer) and stream-stream within a window (inner,
-- left, outer), with tombstones, window boundaries, late records and
-- repartitioning of a side whose key changed.
local beck = require "beck"
local dsl = require "beck.dsl"
local testing = require "beck.testing"

local kvs = require("spec.helpers").kvs
local close_driver = require("spec.helpers").close_driver

local function pair(a, b)
  return tostring(a) .. "+" .. tostring(b)
end

describe("beck.dsl joins", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  describe("stream-table", function()
    local function build(kind, config)
      local app = beck.app { id = "st-" .. kind }
      local users = app:table("users", { store = "users" })
      local clicks = app:stream("clicks")
      clicks[kind](clicks, users, pair):to("out")
      driver = testing.driver(app, config)
      return app, driver:input("users"), driver:input("clicks"), driver:output("out")
    end

    it("join: a record joins the table's current row; no row, no output", function()
      local app, users, clicks, out = build("join")
      clicks:pipe("u1", "c1")
      users:pipe("u1", "alice")
      clicks:pipe("u1", "c2")
      users:pipe("u1", "alicia")
      clicks:pipe("u1", "c3")
      users:pipe("u1", nil) -- tombstone: the row is gone
      clicks:pipe("u1", "c4")
      clicks:pipe("u1", nil) -- a record without value is dropped
      assert.same({ { "u1", "c2+alice" }, { "u1", "c3+alicia" } }, kvs(out:read_all()))
      -- the join and the table are in one subtopology (co-partitioned)
      assert.equal(1, #app:describe().subtopologies)
    end)

    it("left_join: no row gives nil to the joiner", function()
      local _, users, clicks, out = build("left_join")
      clicks:pipe("u1", "c1")
      users:pipe("u1", "alice")
      clicks:pipe("u1", "c2")
      users:pipe("u1", nil)
      clicks:pipe("u1", "c3")
      clicks:pipe(nil, "c4")
      assert.same({ { "u1", "c1+nil" }, { "u1", "c2+alice" }, { "u1", "c3+nil" },
                    { nil, "c4+nil" } }, kvs(out:read_all()))
    end)

    it("repartitions the stream when its key changed, to the table's partitions", function()
      local app = beck.app { id = "st-rekey" }
      local users = app:table("users")
      app:stream("clicks"):select_key(function(_, v) return v:match("^(%w+):") end)
         :join(users, function(click, user) return user .. " " .. click end, { name = "enrich" })
         :to("out")
      driver = testing.driver(app, { partitions = 4 })
      for i = 1, 8 do driver:input("users"):pipe("u" .. i, "user" .. i) end
      for i = 1, 8 do driver:input("clicks"):pipe("click" .. i, "u" .. (9 - i) .. ":page") end
      local out = driver:output("out"):read_key_values()
      for i = 1, 8 do assert.equal("user" .. i .. " u" .. i .. ":page", out["u" .. i]) end
      assert.equal(8, #driver:output("st-rekey-enrich-left-repartition"):read_all())
      assert.equal(2, #app:describe().subtopologies)
    end)

    it("joins a derived table through its parent's store", function()
      local app = beck.app { id = "st-derived" }
      local vip = app:table("users", { store = "users" })
                     :filter(function(_, v) return v:match("^vip ") ~= nil end)
                     :map_values(function(v) return v:sub(5) end)
      app:stream("clicks"):join(vip, pair):to("out")
      driver = testing.driver(app)
      driver:input("users"):pipe_list { { "u1", "vip ann" }, { "u2", "bob" } }
      driver:input("clicks"):pipe_list { { "u1", "c1" }, { "u2", "c2" } }
      assert.same({ { "u1", "c1+ann" } }, kvs(driver:output("out"):read_all()))
      assert.equal(1, #app:describe().stores)
    end)

    it("refuses an outer join and a windowed table", function()
      local app = beck.app { id = "st-bad" }
      local t = app:table("t")
      local s = app:stream("s")
      local ok, err = pcall(function() s:outer_join(t, pair) end)
      assert.is_false(ok)
      assert.matches("outer_join: a stream joins a table with join or left_join", err)
      local w = app:stream("w"):group_by_key():windowed_by(dsl.tumbling(10)):count()
      ok, err = pcall(function() s:join(w, pair) end)
      assert.is_false(ok)
      assert.matches("23%-dsl_join_spec.lua:%d+: join: a windowed table cannot be joined", err)
    end)
  end)

  describe("table-table", function()
    local function build(kind, opts)
      local app = beck.app { id = "tt-" .. kind }
      local l = app:table("left")
      local r = app:table("right")
      local t = l[kind](l, r, pair, opts)
      t:to("out")
      driver = testing.driver(app)
      return driver:input("left"), driver:input("right"), driver:output("out"), t
    end

    it("join: an output when both sides have the key, a deletion when one goes", function()
      local l, r, out = build("join")
      l:pipe("k", "l1")     -- no right: nothing
      r:pipe("k", "r1")     -- l1+r1
      l:pipe("k", "l2")     -- l2+r1
      r:pipe("k", nil)      -- deletion
      l:pipe("k", "l3")     -- no right: nothing
      l:pipe("k", nil)      -- no right: nothing
      r:pipe("k", "r2")     -- no left: nothing
      assert.same({ { "k", "l1+r1" }, { "k", "l2+r1" }, { "k", nil } }, kvs(out:read_all()))
    end)

    it("left_join: every left row, with the right one or nil", function()
      local l, r, out = build("left_join")
      r:pipe("k", "r0")     -- no left: nothing
      l:pipe("k", "l1")     -- l1+r0
      r:pipe("k", nil)      -- l1+nil
      r:pipe("k", "r2")     -- l1+r2
      l:pipe("k", nil)      -- deletion
      r:pipe("k", "r3")     -- no left: nothing
      assert.same({ { "k", "l1+r0" }, { "k", "l1+nil" }, { "k", "l1+r2" }, { "k", nil } },
                  kvs(out:read_all()))
    end)

    it("outer_join: either side, a deletion when both are gone", function()
      local l, r, out = build("outer_join")
      r:pipe("k", "r1")     -- nil+r1
      l:pipe("k", "l1")     -- l1+r1
      r:pipe("k", nil)      -- l1+nil
      l:pipe("k", nil)      -- deletion
      assert.same({ { "k", "nil+r1" }, { "k", "l1+r1" }, { "k", "l1+nil" }, { "k", nil } },
                  kvs(out:read_all()))
    end)

    it("materializes the result in opts.store; joins of joins read both sides", function()
      local app = beck.app { id = "tt-chain" }
      local a, b, c = app:table("a"), app:table("b"), app:table("c")
      a:join(b, pair, { store = "ab" }):left_join(c, pair):to("out")
      driver = testing.driver(app)
      driver:input("a"):pipe("k", "a1")
      driver:input("b"):pipe("k", "b1")
      driver:input("c"):pipe("k", "c1")
      driver:input("a"):pipe("k", "a2")
      assert.equal("a2+b1", driver:store("ab"):get("k"))
      assert.same({ { "k", "a1+b1+nil" }, { "k", "a1+b1+c1" }, { "k", "a2+b1+c1" } },
                  kvs(driver:output("out"):read_all()))
    end)
  end)

  describe("stream-stream", function()
    local function build(kind, window, config)
      local app = beck.app { id = "ss-" .. kind }
      local l, r = app:stream("left"), app:stream("right")
      l[kind](l, r, pair, window):to("out")
      driver = testing.driver(app, config)
      return app, driver:input("left"), driver:input("right"), driver:output("out")
    end

    it("join: records of either side within the window, bounds included", function()
      local _, l, r, out = build("join", dsl.join_window(10))
      l:pipe("k", "l100", 100)
      r:pipe("k", "r90", 90)    -- 100 - 10: joins
      r:pipe("k", "r110", 110)  -- 100 + 10: joins
      r:pipe("k", "r111", 111)  -- outside
      r:pipe("x", "rx", 105)    -- another key
      l:pipe("k", "l120", 120)  -- joins r110 and r111
      assert.same({ { "k", "l100+r90" }, { "k", "l100+r110" }, { "k", "l120+r110" },
                    { "k", "l120+r111" } }, kvs(out:read_all()))
    end)

    it("join_window(before, after): asymmetric, seen from the left", function()
      local _, l, r, out = build("join", dsl.join_window(0, 5))
      l:pipe("k", "l10", 10)
      r:pipe("k", "r9", 9)     -- before the left record: outside
      r:pipe("k", "r15", 15)   -- within 5 after: joins
      assert.same({ { "k", "l10+r15" } }, kvs(out:read_all()))
    end)

    it("left_join emits a left record without partner only once its window closed", function()
      local _, l, r, out = build("left_join", dsl.join_window(5))
      l:pipe("k", "l10", 10)
      l:pipe("k", "l12", 12)
      r:pipe("k", "r14", 14)    -- joins both, which will never come out with nil
      l:pipe("k", "l30", 30)
      assert.same({ { "k", "l10+r14" }, { "k", "l12+r14" } }, kvs(out:read_all()))
      r:pipe("z", "r35", 35)    -- stream time 35: l30 + after 5 + grace 0 >= 35, waiting
      assert.is_true(out:is_empty())
      r:pipe("z", "r36", 36)    -- 36 > 35: l30 comes out with nil, at its own time
      local got = out:read_all()
      assert.same({ { "k", "l30+nil" } }, kvs(got))
      assert.equal(30, got[1].timestamp)
      l:pipe("k", "l20", 20)    -- out of order, 20 + 5 < 36 already: with nil at once
      assert.same({ { "k", "l20+nil" } }, kvs(out:read_all()))
    end)

    it("outer_join: either side without partner comes out with nil", function()
      local _, l, r, out = build("outer_join", dsl.join_window(5))
      l:pipe("k", "l10", 10)
      r:pipe("k", "r14", 14)    -- joins l10
      r:pipe("k", "r16", 16)    -- l10 is outside: waits
      l:pipe("k", "l30", 30)    -- 30 > 16 + 10: r16 comes out
      l:pipe("k", "l50", 50)    -- l30 comes out
      assert.same({ { "k", "l10+r14" }, { "k", "nil+r16" }, { "k", "l30+nil" } },
                  kvs(out:read_all()))
    end)

    it("finds what the other side's store still holds, and drops nothing as late", function()
      -- Kafka Streams' rule: a store holds before + after + grace (20 here) of its own newest
      -- time; a record however late joins what is still there
      local app, l, r, out = build("join", dsl.join_window(5):grace(10))
      l:pipe("k", "l100", 100)
      r:pipe("k", "r100", 100)
      r:pipe("k", "r105", 105)
      r:pipe("z", "r130", 130)  -- the right store's newest: 130, it holds 111 on
      r:pipe("k", "r116", 116)
      l:pipe("k", "l108", 108)  -- r105 is in its window, but no longer held
      l:pipe("k", "l114", 114)  -- past its window's grace, still joins r116
      local got = out:read_all()
      assert.same({ { "k", "l100+r100" }, { "k", "l100+r105" }, { "k", "l114+r116" } },
                  kvs(got))
      assert.same({ 100, 105, 116 }, { got[1].timestamp, got[2].timestamp, got[3].timestamp })
      assert.equal(0, dsl.stats(app).dropped_late or 0)
    end)

    it("forgets a side's records once its own newest time is past them", function()
      local app = build("join", dsl.join_window(5))
      driver:input("left"):pipe("k", "l1", 1)
      driver:input("right"):pipe("k", "r2", 2)
      assert.equal(2, driver:store("join-1-this-store"):count()) -- record and index entry
      driver:input("left"):pipe("z", "l40", 40)
      assert.equal(2, driver:store("join-1-this-store"):count()) -- only l40 left
      -- r2 stays: the right side's newest time is 2, a late left record may still find it
      assert.equal(2, driver:store("join-1-other-store"):count())
      driver:input("right"):pipe("z", "r60", 60)
      driver:input("right"):pipe("z", "r70", 70)
      assert.equal(2, driver:store("join-1-other-store"):count()) -- only r70 left
      assert.is_nil(app:describe().store_index["join-1-outer-store"])
    end)

    it("repartitions a side whose key changed, and takes a number as window", function()
      local app = beck.app { id = "ss-rekey" }
      local l = app:stream("left"):select_key(function(_, v) return v:sub(1, 1) end)
      local r = app:stream("right")
      l:join(r, pair, 100, { name = "j" }):to("out")
      driver = testing.driver(app, { partitions = 3 })
      driver:input("left"):pipe_list { { "1", "apple", 10 }, { "2", "banana", 10 } }
      driver:input("right"):pipe_list { { "a", "A", 20 }, { "b", "B", 20 } }
      assert.same({ a = "apple+A", b = "banana+B" }, driver:output("out"):read_key_values())
      assert.equal(2, #driver:output("ss-rekey-j-left-repartition"):read_all())
      assert.is_nil(app:describe().topic_index["ss-rekey-j-right-repartition"])
    end)

    it("refuses a join of two streams without a window", function()
      local app = beck.app { id = "ss-bad" }
      local ok, err = pcall(function() app:stream("a"):join(app:stream("b"), pair) end)
      assert.is_false(ok)
      assert.matches("23%-dsl_join_spec.lua:%d+: join of two streams: expected a window", err)
    end)
  end)
end)
