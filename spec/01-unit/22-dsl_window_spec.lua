-- beck.dsl windows through the test driver: tumbling and hopping window
-- boundaries, grace and late records (dropped and counted), retention,
-- sessions that merge, windowed keys, and the window store's key layout.
local beck = require "beck"
local dsl = require "beck.dsl"
local testing = require "beck.testing"
local cjson = require "cjson"

local kvs = require("spec.helpers").kvs
local close_driver = require("spec.helpers").close_driver

-- The windows in a window store, index entries left out: { key, t1 [, t2], value }.
local function windows(driver, store)
  local list = {}
  for k, v in driver:store(store):all() do
    local key, t1, t2 = dsl.parse_window_key(k)
    if key then list[#list + 1] = t2 and { key, t1, t2, v } or { key, t1, v } end
  end
  return list
end

local function entries(driver, store)
  return driver:store(store):count()
end

describe("beck.dsl windows", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  local function windowed_count(spec, opts)
    local app = beck.app { id = "win" }
    app:stream("in"):group_by_key():windowed_by(spec):count(opts or { store = "w" }):to("out")
    driver = testing.driver(app)
    return app, driver:input("in"), driver:output("out")
  end

  describe("tumbling", function()
    it("puts a record at end - 1 in the window and one at end in the next", function()
      local _, input, out = windowed_count(dsl.tumbling(10))
      input:pipe("a", "x", 0)
      input:pipe("a", "x", 9)
      input:pipe("a", "x", 10)
      input:pipe("b", "x", 19)
      input:pipe("a", "x", 20)
      assert.same({ { "a@0", "1" }, { "a@0", "2" }, { "a@10", "1" }, { "b@10", "1" },
                    { "a@20", "1" } }, kvs(out:read_all()))
    end)

    it("stamps each update with the window's newest record's time, as Kafka Streams",
       function()
      local _, input, out = windowed_count(dsl.tumbling(10):grace(10))
      input:pipe("a", "x", 5)
      input:pipe("a", "x", 3) -- older: the window keeps 5
      input:pipe("a", "x", 8)
      local got = {}
      for i, r in ipairs(out:read_all()) do got[i] = { r.key, r.value, r.timestamp } end
      assert.same({ { "a@0", "1", 5 }, { "a@0", "2", 5 }, { "a@0", "3", 8 } }, got)
    end)

    it("forwards windowed keys { key, start, end }", function()
      local app = beck.app { id = "win-keys" }
      local seen = {}
      app:stream("in"):group_by_key():windowed_by(dsl.tumbling(100)):count():to_stream()
         :foreach(function(w, n)
           seen[#seen + 1] = { w.key, w.start, w["end"], n, dsl.is_windowed(w), tostring(w) }
         end)
      driver = testing.driver(app)
      driver:input("in"):pipe("k", "v", 250)
      assert.same({ { "k", 200, 300, 1, true, "k@200" } }, seen)
    end)

    it("keeps windows in the store by record key, then window start", function()
      local _, input = windowed_count(dsl.tumbling(10):grace(10))
      input:pipe("bb", "x", 15)
      input:pipe("a", "x", 12)
      input:pipe("a", "x", 3)
      input:pipe("a", "x", 11)
      -- [4-byte length][key][8-byte start], big-endian
      assert.equal("\0\0\0\1a\0\0\0\0\0\0\0\10", dsl.window_key("a", 10))
      assert.equal("2", driver:store("w"):get(dsl.window_key("a", 10)))
      assert.same({ { "a", 0, "1" }, { "a", 10, "2" }, { "bb", 10, "1" } }, windows(driver, "w"))
    end)
  end)

  describe("hopping", function()
    it("counts a record in every window that holds it, none before time 0", function()
      local _, input, out = windowed_count(dsl.hopping(10, 5))
      input:pipe("a", "x", 3)
      input:pipe("a", "x", 12)
      assert.same({ { "a@0", "1" }, { "a@5", "1" }, { "a@10", "1" } }, kvs(out:read_all()))
      input:pipe("a", "x", 10)
      assert.same({ { "a@5", "2" }, { "a@10", "2" } }, kvs(out:read_all()))
    end)

    it("refuses an advance larger than the size", function()
      local ok, err = pcall(dsl.hopping, 10, 20)
      assert.is_false(ok)
      assert.matches("hopping: the advance %(20%) is larger than the size %(10%)", err)
    end)
  end)

  describe("grace and late records", function()
    it("takes a record until end + grace, drops and counts it from there", function()
      local app, input, out = windowed_count(dsl.tumbling(10):grace(5))
      input:pipe("a", "x", 5)
      input:pipe("a", "x", 14) -- stream time 14: [0, 10) open until 15
      input:pipe("a", "x", 9)  -- in grace
      assert.same({ { "a@0", "1" }, { "a@10", "1" }, { "a@0", "2" } }, kvs(out:read_all()))
      input:pipe("a", "x", 15) -- [0, 10) closes
      input:pipe("a", "x", 8)  -- late: dropped
      input:pipe("b", "x", 1)  -- late too, whatever the key
      assert.same({ { "a@10", "2" } }, kvs(out:read_all()))
      local stats = dsl.stats(app)
      assert.equal(2, stats.dropped_late)
      assert.same({ ["count-1"] = 2 }, stats.by_processor)
      assert.equal("2", driver:store("w"):get(dsl.window_key("a", 0)))
    end)

    it("with no grace, a window takes nothing once stream time reaches its end", function()
      local app, input, out = windowed_count(dsl.tumbling(10))
      input:pipe("a", "x", 10)
      input:pipe("a", "x", 9)
      assert.same({ { "a@10", "1" } }, kvs(out:read_all()))
      assert.equal(1, dsl.stats(app).dropped_late)
    end)

    it("drops only the closed windows of a hopping record", function()
      local app, input, out = windowed_count(dsl.hopping(10, 5))
      input:pipe("a", "x", 12)
      out:read_all()
      input:pipe("a", "x", 7) -- [0, 10) closed at 12; [5, 15) open
      assert.same({ { "a@5", "2" } }, kvs(out:read_all()))
      assert.equal(1, dsl.stats(app).dropped_late)
    end)
  end)

  describe("retention", function()
    it("deletes windows (and their index entries) once stream time passes size + grace", function()
      -- retention 15 ms, checked every 7 ms of stream time
      local _, input = windowed_count(dsl.tumbling(10):grace(5))
      input:pipe("a", "x", 1)
      input:pipe("b", "x", 12)
      assert.equal(4, entries(driver, "w")) -- two windows, two index entries
      input:pipe("c", "x", 15) -- [0, 10) closes; expiry at 14 kept start >= -1
      assert.same({ { "a", 0, "1" }, { "b", 10, "1" }, { "c", 10, "1" } }, windows(driver, "w"))
      input:pipe("c", "x", 22) -- expiry at 22: start < 7 goes
      assert.same({ { "b", 10, "1" }, { "c", 10, "1" }, { "c", 20, "1" } }, windows(driver, "w"))
      assert.equal(6, entries(driver, "w"))
    end)

    it("keeps windows longer with opts.retention", function()
      local _, input = windowed_count(dsl.tumbling(10), { store = "w", retention = 100 })
      input:pipe("a", "x", 1)
      input:pipe("a", "x", 90)
      assert.same({ { "a", 0, "1" }, { "a", 90, "1" } }, windows(driver, "w"))
      input:pipe("a", "x", 120)
      assert.same({ { "a", 90, "1" }, { "a", 120, "1" } }, windows(driver, "w"))
    end)

    it("refuses a retention shorter than size + grace", function()
      local app = beck.app { id = "ret" }
      local ok, err = pcall(function()
        app:stream("in"):group_by_key():windowed_by(dsl.tumbling(10):grace(5))
           :count { retention = 12 }
      end)
      assert.is_false(ok)
      assert.matches("22%-dsl_window_spec.lua:%d+: count: retention %(12 ms%) is shorter", err)
    end)
  end)

  describe("sessions", function()
    it("merges records less than gap apart; a bridging record merges two sessions", function()
      local _, input, out = windowed_count(dsl.session(10):grace(20))
      input:pipe("a", "x", 0)
      input:pipe("a", "x", 5)  -- [0, 0] grows to [0, 5]
      input:pipe("a", "x", 30)
      assert.same({ { "a@0/0", "1" }, { "a@0/0", nil }, { "a@0/5", "2" }, { "a@30/30", "1" } },
                  kvs(out:read_all()))
      -- [4-byte length][key][8-byte end][8-byte start]
      assert.same({ { "a", 5, 0, "2" }, { "a", 30, 30, "1" } }, windows(driver, "w"))
      assert.equal("1", driver:store("w"):get(dsl.window_key("a", 30, 30)))
      input:pipe("a", "x", 18) -- 18 - 10 > 5 and 18 + 10 < 30: a session of its own
      assert.same({ { "a@18/18", "1" } }, kvs(out:read_all()))
      input:pipe("a", "x", 22) -- within 10 of [18, 18] and of [30, 30]: one session [18, 30]
      assert.same({ { "a@18/18", nil }, { "a@30/30", nil }, { "a@18/30", "3" } },
                  kvs(out:read_all()))
      assert.same({ { "a", 5, 0, "2" }, { "a", 30, 18, "3" } }, windows(driver, "w"))
    end)

    it("gives sessions start and end (inclusive) in their keys", function()
      local app = beck.app { id = "sess-keys" }
      local seen = {}
      app:stream("in"):group_by_key():windowed_by(dsl.session(10)):count():to_stream()
         :foreach(function(w, n) seen[#seen + 1] = { w.start, w["end"], n } end)
      driver = testing.driver(app)
      driver:input("in"):pipe("k", "v", 100)
      driver:input("in"):pipe("k", "v", 107)
      assert.same({ { 100, 100, 1 }, { 100, 100, nil }, { 100, 107, 2 } }, seen)
    end)

    it("drops a record whose session ended more than gap + grace before stream time",
       function()
      -- Kafka Streams 4.4's rule: late once the merged session's end < stream time - grace
      -- - gap (here 85)
      local app, input, out = windowed_count(dsl.session(10):grace(5))
      input:pipe("a", "x", 100)
      input:pipe("b", "x", 96) -- its session [96, 96], taken
      input:pipe("b", "x", 90) -- merges with [96, 96]: session [90, 96], taken
      input:pipe("c", "x", 85) -- alone: 85 is not before 85, taken
      input:pipe("d", "x", 84) -- alone: 84 < 85, dropped
      assert.same({ { "a@100/100", "1" }, { "b@96/96", "1" }, { "b@96/96", nil },
                    { "b@90/96", "2" }, { "c@85/85", "1" } }, kvs(out:read_all()))
      assert.equal(1, dsl.stats(app).dropped_late)
    end)

    it("forwards a session a record falls into as a deletion, then anew, each at its end",
       function()
      local app = beck.app { id = "sess-inside" }
      local seen = {}
      app:stream("in"):group_by_key():windowed_by(dsl.session(10)):count():to_stream()
         :process { process = function(ctx, w, n)
           seen[#seen + 1] = { w.start, w["end"], n, ctx:timestamp() }
         end }
      driver = testing.driver(app)
      driver:input("in"):pipe("k", "v", 100)
      driver:input("in"):pipe("k", "v", 108) -- grows [100, 100] to [100, 108]
      driver:input("in"):pipe("k", "v", 104) -- inside [100, 108]: deleted and put again
      assert.same({ { 100, 100, 1, 100 }, { 100, 100, nil, 100 }, { 100, 108, 2, 108 },
                    { 100, 108, nil, 108 }, { 100, 108, 3, 108 } }, seen)
    end)

    it("reduce merges sessions with its reducer; aggregate needs a merger", function()
      local app = beck.app { id = "sess-reduce" }
      -- (grace 20: the store still holds [0, 0] when the record at 10 bridges it to [20, 20])
      local g = app:stream("in"):group_by_key():windowed_by(dsl.session(10):grace(20))
      g:reduce(function(a, b) return a .. b end):to("out")
      local ok, err = pcall(function() g:aggregate("", function(_, v, a) return a .. v end) end)
      assert.is_false(ok)
      assert.matches("give opts.merger", err)
      g:aggregate(function() return "" end, function(_, v, a) return a .. v end,
                  { merger = function(_, a, b) return a .. b end }):to("agg")
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "k", "a", 0 }, { "k", "c", 20 }, { "k", "b", 10 } }
      assert.same({ { "k@0/0", "a" }, { "k@20/20", "c" }, { "k@0/0", nil }, { "k@20/20", nil },
                    { "k@0/20", "acb" } }, kvs(driver:output("out"):read_all()))
      assert.same({ ["k@0/20"] = "acb" }, driver:output("agg"):read_key_values())
    end)

    it("expires sessions once stream time passes their end + gap + grace", function()
      -- retention 10 ms (Kafka Streams': gap + grace), checked every 5 ms of stream time
      local _, input = windowed_count(dsl.session(10))
      input:pipe("a", "x", 0)
      input:pipe("b", "x", 9)
      assert.same({ { "a", 0, 0, "1" }, { "b", 9, 9, "1" } }, windows(driver, "w"))
      input:pipe("b", "x", 16) -- expiry at 16: sessions ending before 6 go
      assert.same({ { "b", 16, 9, "2" } }, windows(driver, "w"))
      assert.equal(2, entries(driver, "w"))
    end)

    it("merges only what the store still holds", function()
      local _, input, out = windowed_count(dsl.session(10):grace(20)) -- retention 30
      input:pipe("a", "x", 0)
      input:pipe("b", "x", 40) -- stream time 40: [0, 0] ended before 40 - 30 + 1
      out:read_all()
      input:pipe("a", "x", 10) -- within gap of [0, 0], which expired: a session of its own
      assert.same({ { "a@10/10", "1" } }, kvs(out:read_all()))
    end)
  end)

  describe("windowed aggregations", function()
    it("reduce and aggregate per window, with serdes for windowed keys", function()
      local app = beck.app { id = "win-agg" }
      local g = app:stream("in"):group_by_key():windowed_by(dsl.tumbling(10))
      g:reduce(function(a, b) return a .. b end):to("concat")
      g:aggregate(function() return { n = 0 } end, function(_, _, agg)
        agg.n = agg.n + 1
        return agg
      end, { value_serde = "json" }):to("json", { key_serde = "json", value_serde = "json" })
      driver = testing.driver(app)
      driver:input("in"):pipe_list { { "k", "a", 1 }, { "k", "b", 2 }, { "k", "c", 11 } }
      assert.same({ { "k@0", "a" }, { "k@0", "ab" }, { "k@10", "c" } },
                  kvs(driver:output("concat"):read_all()))
      local last = driver:output("json"):read_all()[3]
      assert.same({ key = "k", start = 10, ["end"] = 20 }, cjson.decode(last.key))
      assert.same({ n = 1 }, cjson.decode(last.value))
    end)

    it("after a key change, windows are kept by the new key's task", function()
      local app = beck.app { id = "win-rekey" }
      app:stream("in"):select_key(function(_, v) return v end):group_by_key()
         :windowed_by(dsl.tumbling(100)):count { store = "w" }:to("out")
      driver = testing.driver(app, { partitions = 3 })
      for i = 1, 9 do driver:input("in"):pipe("k" .. i, "v" .. (i % 2), i * 10) end
      assert.same({ ["v0@0"] = "4", ["v1@0"] = "5" }, driver:output("out"):read_key_values())
      assert.same({ { "v0", 0, "4" }, { "v1", 0, "5" } }, windows(driver, "w"))
    end)

    it("refuses what is not a window", function()
      local app = beck.app { id = "win-bad" }
      local ok, err = pcall(function() app:stream("in"):group_by_key():windowed_by(10) end)
      assert.is_false(ok)
      assert.matches("windowed_by: expected tumbling", err)
      ok, err = pcall(dsl.tumbling, 0)
      assert.is_false(ok)
      assert.matches("tumbling: expected a whole number of ms >= 1, got 0", err)
    end)
  end)

  describe("emit final", function()
    local ktv = require("spec.helpers").ktv

    it("forwards each time window once, when stream time passes its end + grace", function()
      local app, input, out = windowed_count(dsl.tumbling(10):grace(5),
                                             { store = "w", emit = "final" })
      input:pipe("a", "x", 1)
      input:pipe("b", "x", 7)
      input:pipe("a", "x", 5)
      input:pipe("a", "x", 12) -- stream time 12: [0, 10) open until 15
      assert.same({}, out:read_all())
      input:pipe("a", "x", 15) -- closes [0, 10): every key's, at its newest record's time
      assert.same({ { "a@0", 5, "2" }, { "b@0", 7, "1" } }, ktv(out:read_all()))
      input:pipe("a", "x", 9)  -- late: dropped, nothing forwarded
      input:pipe("c", "x", 24) -- stream time 24: [10, 20) open until 25
      assert.same({}, out:read_all())
      assert.equal(1, dsl.stats(app).dropped_late)
      input:pipe("c", "x", 40) -- closes [10, 20) and [20, 30) at once
      assert.same({ { "a@10", 15, "2" }, { "c@20", 24, "1" } }, ktv(out:read_all()))
      -- the store still holds them until retention (size + grace) passes
      input:pipe("c", "x", 40)
      assert.same({}, out:read_all())
    end)

    it("forwards each hopping window of a record once", function()
      local _, input, out = windowed_count(dsl.hopping(10, 5), { store = "w", emit = "final" })
      input:pipe("a", "x", 7)  -- in [0, 10) and [5, 15)
      input:pipe("a", "x", 11) -- in [5, 15) and [10, 20); closes [0, 10)
      assert.same({ { "a@0", 7, "1" } }, ktv(out:read_all()))
      input:pipe("a", "x", 19) -- closes [5, 15)
      assert.same({ { "a@5", 11, "2" } }, ktv(out:read_all()))
      input:pipe("a", "x", 100)
      assert.same({ { "a@10", 19, "2" }, { "a@15", 19, "1" } }, ktv(out:read_all()))
    end)

    it("forwards each session once it closes (end + gap + grace), at its end", function()
      local _, input, out = windowed_count(dsl.session(10), { store = "w", emit = "final" })
      input:pipe("a", "x", 0)
      input:pipe("a", "x", 5)  -- [0, 5]
      input:pipe("b", "x", 3)
      assert.same({}, out:read_all())
      input:pipe("a", "x", 14) -- [0, 14]: no deletion forwarded; close time 4: [3, 3] closes
      assert.same({ { "b@3/3", 3, "1" } }, ktv(out:read_all()))
      input:pipe("c", "x", 24) -- close time 14: sessions ending before 14 close
      assert.same({}, out:read_all())
      input:pipe("c", "x", 25)
      assert.same({ { "a@0/14", 14, "3" } }, ktv(out:read_all()))
    end)

    it("refuses an emit it does not know, saying where", function()
      local ok, err = pcall(windowed_count, dsl.tumbling(10), { emit = "on_close" })
      assert.is_false(ok)
      assert.matches("22%-dsl_window_spec.lua:%d+: count: emit must be \"update\"", err)
    end)
  end)
end)
