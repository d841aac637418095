-- beck.dsl table:suppress (Kafka Streams' KTable#suppress) through the test driver: final
-- results of windows (until = "window_close"), a time limit with a key's first buffered
-- time, bounded buffers that emit early or fail, and errors at the topology's line.
local beck = require "beck"
local dsl = require "beck.dsl"
local testing = require "beck.testing"

local close_driver = require("spec.helpers").close_driver

local ktv = require("spec.helpers").ktv

describe("beck.dsl suppress", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("forwards a window's last update once stream time passes its end + grace", function()
    local app = beck.app { id = "sup1" }
    app:stream("in"):group_by_key():windowed_by(dsl.tumbling(10):grace(5)):count()
       :suppress { ["until"] = "window_close" }:to_stream():to("out")
    driver = testing.driver(app)
    local input, out = driver:input("in"), driver:output("out")
    input:pipe("a", "x", 1)
    input:pipe("b", "x", 3)
    input:pipe("a", "x", 8)
    input:pipe("a", "x", 12) -- [0, 10) open until 15
    assert.same({}, out:read_all())
    input:pipe("a", "x", 9) -- in grace: counted, still held
    input:pipe("c", "x", 15) -- closes [0, 10): its last values, at their records' times
    assert.same({ { "a@0", 9, "3" }, { "b@0", 3, "1" } }, ktv(out:read_all()))
    input:pipe("c", "x", 40)
    assert.same({ { "a@10", 12, "1" }, { "c@10", 15, "1" } }, ktv(out:read_all()))
    assert.equal(2, driver:store("suppress-1-buffer"):count()) -- [40, 50) of c, and its index
  end)

  it("waits gap + grace after a session's end", function()
    local app = beck.app { id = "sup2" }
    app:stream("in"):group_by_key():windowed_by(dsl.session(10)):count()
       :suppress { ["until"] = "window_close" }:to_stream():to("out")
    driver = testing.driver(app)
    local input, out = driver:input("in"), driver:output("out")
    input:pipe("a", "x", 0)
    input:pipe("a", "x", 5) -- [0, 0] deleted (not forwarded: a final result), [0, 5]
    input:pipe("b", "x", 14)
    assert.same({}, out:read_all())
    input:pipe("b", "x", 15) -- 15 >= 5 + 10
    assert.same({ { "a@0/5", 5, "2" } }, ktv(out:read_all()))
  end)

  it("holds a key for time_limit_ms after its first update, with its latest value",
     function()
    local app = beck.app { id = "sup3" }
    app:stream("in"):to_table():suppress { ["until"] = "time_limit", time_limit_ms = 10 }
       :to_stream():to("out")
    driver = testing.driver(app)
    local input, out = driver:input("in"), driver:output("out")
    input:pipe("a", "1", 0)
    input:pipe("b", "1", 4)
    input:pipe("a", "2", 7) -- a keeps its place (time 0), value 2
    input:pipe("b", nil, 9) -- a deletion is held like any update
    assert.same({}, out:read_all())
    input:pipe("c", "1", 10) -- 0 <= 10 - 10
    assert.same({ { "a", 7, "2" } }, ktv(out:read_all()))
    input:pipe("c", "2", 14)
    assert.same({ { "b", 9, nil } }, ktv(out:read_all()))
  end)

  it("emits the oldest early when full, or fails when told to", function()
    local app = beck.app { id = "sup4" }
    local t = app:stream("in"):to_table()
    t:suppress { ["until"] = "time_limit", time_limit_ms = 1000, max_records = 2 }
     :to_stream():to("early")
    t:suppress { ["until"] = "time_limit", time_limit_ms = 1000, max_records = 2,
                 when_full = "shut_down" }:to_stream():to("strict")
    driver = testing.driver(app)
    local input = driver:input("in")
    input:pipe("a", "1", 1)
    input:pipe("b", "1", 2)
    local ok, err = pcall(input.pipe, input, "c", "1", 3)
    assert.is_false(ok)
    assert.matches("its buffer is full: 3 record%(s%) of 2", err)
    assert.same({ { "a", 1, "1" } }, ktv(driver:output("early"):read_all()))
  end)

  it("says at the topology's line what it cannot do", function()
    local app = beck.app { id = "sup5" }
    local t = app:stream("in"):to_table()
    local ok, err = pcall(function() t:suppress { ["until"] = "window_close" } end)
    assert.is_false(ok)
    assert.matches("39%-dsl_suppress_spec.lua:%d+: suppress: until = \"window_close\" needs " ..
                   "a windowed table", err)
    ok, err = pcall(function() t:suppress { ["until"] = "soon" } end)
    assert.matches("suppress: until must be", err)
    ok, err = pcall(function() t:suppress { ["until"] = "time_limit" } end)
    assert.matches("suppress: time_limit_ms must be a whole number", err)
  end)
end)
