-- beck.serde and the serdes of the DSL: string (the default), json, number
-- and user serdes, per stream (sources, to, repartition topics) and per
-- store, and the errors that say where a serde is missing.
local beck = require "beck"
local serde = require "beck.serde"
local testing = require "beck.testing"
local cjson = require "cjson"

local kvs = require("spec.helpers").kvs
local close_driver = require("spec.helpers").close_driver

local function this_line()
  return debug.getinfo(2, "l").currentline
end

-- A user serde: "a,b,c" <-> { "a", "b", "c" }.
local CSV = {
  serialize = function(list) return list and table.concat(list, ",") end,
  deserialize = function(s)
    if s == nil then return nil end
    local list = {}
    for f in (s .. ","):gmatch("([^,]*),") do list[#list + 1] = f end
    return list
  end,
}

describe("beck.serde", function()
  it("string: strings as they are, numbers and booleans as text, nil as nil", function()
    local s = serde.string
    assert.equal("x", s.serialize("x"))
    assert.equal("42", s.serialize(42))
    assert.equal("1000000000000000", s.serialize(1e15))
    assert.equal("-7", s.serialize(-7))
    assert.equal("0.1", s.serialize(0.1))
    assert.equal(1 / 3, tonumber(s.serialize(1 / 3)))
    assert.equal("false", s.serialize(false))
    assert.is_nil(s.serialize(nil))
    assert.equal("k@60000", s.serialize(serde.windowed("k", 60000, 120000)))
    assert.equal("k@5/9", s.serialize(serde.session("k", 5, 9)))
    assert.equal("42", s.deserialize("42"))
    assert.has_error(function() s.serialize({}) end)
  end)

  it("json: any value and back", function()
    local j = serde.json
    assert.equal('"x"', j.serialize("x"))
    assert.same({ a = { 1, 2 } }, j.deserialize(j.serialize({ a = { 1, 2 } })))
    assert.equal(12.5, j.deserialize("12.5"))
    assert.is_nil(j.serialize(nil))
    assert.is_nil(j.deserialize(nil))
    local ok, err = pcall(j.deserialize, "{oops", "topic t: value: ")
    assert.is_false(ok)
    assert.matches("^topic t: value: not JSON %(.*%): {oops$", err)
  end)

  it("number: decimal text and back", function()
    assert.equal("3", serde.number.serialize(3))
    assert.equal(3, serde.number.deserialize("3"))
    assert.has_error(function() serde.number.deserialize("three") end)
  end)

  it("of(): a name, a serde table, or an error", function()
    assert.equal(serde.json, serde.of("json"))
    assert.equal(serde.string, serde.of(nil))
    assert.equal(serde.number, serde.of(nil, serde.number))
    assert.equal(CSV.serialize, serde.of(CSV).serialize)
    assert.has_error(function() serde.of("xml") end)
    assert.has_error(function() serde.of({ serialize = print }) end)
  end)
end)

describe("beck.dsl serdes", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("reads and writes JSON per stream; the serde follows the records", function()
    local app = beck.app { id = "sd1" }
    local orders = app:stream("orders", { value_serde = "json" })
    local paid = orders:filter(function(_, o) return o.status == "paid" end)
    paid:to("paid")                                          -- still JSON
    paid:map_values(function(o) return o.amount end):to("amounts") -- a new value: string
    driver = testing.driver(app)
    driver:input("orders"):pipe_list {
      { "o1", '{"status":"paid","amount":12.5}' },
      { "o2", '{"status":"new","amount":1}' },
    }
    local out = driver:output("paid"):read_all()
    assert.equal(1, #out)
    assert.same({ status = "paid", amount = 12.5 }, cjson.decode(out[1].value))
    assert.same({ { "o1", "12.5" } }, kvs(driver:output("amounts"):read_all()))
  end)

  it("a record the source serde cannot read fails with the topic's name (or goes to the DLQ)",
     function()
    local app = beck.app { id = "sd2", on_error = "dlq" }
    app:stream("orders", { value_serde = "json" }):to("out")
    driver = testing.driver(app)
    driver:input("orders"):pipe("o1", "{not json")
    local dead = driver:output("sd2-dlq"):read()
    assert.equal("{not json", dead.value)
    assert.matches("topic orders: value: not JSON", dead.headers["beck.error"])
  end)

  it("user serdes per stream and per store", function()
    local app = beck.app { id = "sd3" }
    app:stream("in", { value_serde = CSV })
       :group_by_key()
       :reduce(function(agg, fields)
         for _, f in ipairs(fields) do agg[#agg + 1] = f end
         return agg
       end, { store = "all" })
       :to("out")
    driver = testing.driver(app)
    driver:input("in"):pipe_list { { "k", "a,b" }, { "k", "c" } }
    assert.same({ { "k", "a,b" }, { "k", "a,b,c" } }, kvs(driver:output("out"):read_all()))
    assert.equal("a,b,c", driver:store("all"):get("k"))
  end)

  it("JSON keys: through a repartition topic and into a store", function()
    local app = beck.app { id = "sd4" }
    app:stream("in", { value_serde = "json" })
       :select_key(function(_, v) return { region = v.region } end, { key_serde = "json" })
       :group_by_key()
       :count { store = "per-region" }
       :to("out")
    driver = testing.driver(app, { partitions = 2 })
    driver:input("in"):pipe_list { { "1", '{"region":"eu"}' }, { "2", '{"region":"us"}' },
                                   { "3", '{"region":"eu"}' } }
    assert.same({ ['{"region":"eu"}'] = "2", ['{"region":"us"}'] = "1" },
                driver:output("out"):read_key_values())
    assert.equal("2", driver:store("per-region"):get('{"region":"eu"}'))
    assert.equal('{"region":"us"}', driver:output("sd4-per-region-repartition"):read_all()[2].key)
  end)

  it("a table value without a serde fails at the repartition topic, naming the grouping", function()
    local app = beck.app { id = "sd5" }
    local line
    local s = app:stream("in"):map(function(k, v) return v, { k } end)
    line = this_line() + 1
    s:group_by_key():count():to("out")
    driver = testing.driver(app)
    local input = driver:input("in")
    local ok, err = pcall(input.pipe, input, "k", "v")
    assert.is_false(ok)
    assert.matches("repartition topic sd5%-count%-1%-repartition %(.*24%-dsl_serde_spec.lua:" ..
                   line .. "%): value: the string serde cannot write a table", err)
  end)

  it("... and passes with value_serde = \"json\" on the grouping", function()
    local app = beck.app { id = "sd6" }
    app:stream("in"):map(function(k, v) return v, { k } end)
       :group_by_key { value_serde = "json" }
       :reduce(function(a, b) return { a[1] .. b[1] } end, { store = "r" })
       :to("out", { value_serde = "json" })
    driver = testing.driver(app)
    driver:input("in"):pipe_list { { "a", "x" }, { "b", "x" } }
    assert.same({ x = '["ab"]' }, driver:output("out"):read_key_values())
    assert.equal('["ab"]', driver:store("r"):get("x"))
  end)

  it("an aggregate that is a table needs a store serde, and says so", function()
    local app = beck.app { id = "sd7" }
    app:stream("in"):group_by_key()
       :aggregate(function() return {} end, function(_, v, a)
         a[#a + 1] = v
         return a
       end, { store = "lists" })
    driver = testing.driver(app)
    local input = driver:input("in")
    local ok, err = pcall(input.pipe, input, "k", "v")
    assert.is_false(ok)
    assert.matches("aggregate %(.*%): store lists: value: the string serde cannot write a table",
                   err)
  end)

  it("refuses an unknown serde at the topology's line", function()
    local app = beck.app { id = "sd8" }
    local line = this_line() + 1
    local ok, err = pcall(function() app:stream("in", { value_serde = "xml" }) end)
    assert.is_false(ok)
    assert.matches("24%-dsl_serde_spec.lua:" .. line .. ": stream: value_serde: serde: unknown " ..
                   "serde 'xml'", err)
  end)

  describe("Kafka Streams' windowed serdes", function()
    it("writes a time window as TimeWindowedSerde does, and reads it back", function()
      local sd = serde.time_windowed(60000)
      local raw = sd.serialize(serde.windowed("k1", 1796627640000, 1796627700000))
      -- the key's bytes, then the start: 8 bytes big-endian (1796627640000 = 0x1a24f5a2ec0)
      assert.equal("k1\0\0\1\162\79\90\46\192", raw)
      local w = sd.deserialize(raw)
      assert.same({ "k1", 1796627640000, 1796627700000, true },
                  { w.key, w.start, w["end"], serde.is_windowed(w) })
      assert.equal("k1@1796627640000", tostring(w))
    end)

    it("writes a session as SessionWindowedSerde does: key, end, start", function()
      local sd = serde.session_windowed("json")
      local raw = sd.serialize(serde.session({ id = 7 }, 256, 65536))
      assert.equal('{"id":7}' .. "\0\0\0\0\0\1\0\0" .. "\0\0\0\0\0\0\1\0", raw)
      local w = sd.deserialize(raw)
      assert.same({ { id = 7 }, 256, 65536 }, { w.key, w.start, w["end"] })
    end)

    it("writes a topic a Java consumer reads with WindowedSerdes", function()
      local dsl = require "beck.dsl"
      local app = beck.app { id = "sd-win" }
      app:stream("in"):group_by_key():windowed_by(dsl.tumbling(1000)):count():to_stream()
         :to("out", { key_serde = dsl.serde.time_windowed(1000) })
      driver = testing.driver(app)
      driver:input("in"):pipe("a", "x", 2500)
      local r = driver:output("out"):read_all()[1]
      assert.equal("a\0\0\0\0\0\0\7\208", r.key) -- start 2000
      assert.equal("1", r.value)
    end)

    it("says what is wrong with what it cannot write or read", function()
      local sd = serde.time_windowed(10)
      local ok, err = pcall(sd.serialize, "plain", "to out: key: ")
      assert.is_false(ok)
      assert.matches("to out: key: the time_windowed serde writes windowed keys", err)
      ok, err = pcall(sd.deserialize, "short", "source in: key: ")
      assert.is_false(ok)
      assert.matches("source in: key: not a time_windowed key: 5 bytes, fewer than 8", err)
      ok, err = pcall(serde.time_windowed, 0)
      assert.is_false(ok)
      assert.matches("time_windowed: expected the window size in ms", err)
    end)
  end)
end)
