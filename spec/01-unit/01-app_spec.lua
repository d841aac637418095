-- The topology builder: declarations, validation and the plan given to C.
local beck = require "beck"

describe("beck.app", function()
  it("describes sources, processors and sinks as subtopologies", function()
    local app = beck.app { id = "t1" }
    app:source("a", "in-a")
    app:processor("p", { process = function() end }, "a")
    app:sink("s", "out", "p")
    app:source("b", { "in-b", "in-c" })
    app:sink("s2", "out2", "b")
    local plan = app:describe()
    assert.equal("t1", plan.id)
    assert.equal(2, #plan.subtopologies)
    assert.same({ "in-a", "in-b", "in-c", "out", "out2" },
      (function() local t = {} for i, x in ipairs(plan.topics) do t[i] = x.name end return t end)())
    assert.same({ 2, 3 }, plan.subtopologies[2].topics)
    assert.is_true(plan.topics[4].sink)
    assert.is_false(plan.topics[4].source)
  end)

  it("rejects an unknown parent, naming the script line", function()
    local app = beck.app { id = "t2" }
    app:source("a", "in")
    local ok, err = pcall(function() app:processor("p", { process = function() end }, "nope") end)
    assert.is_false(ok)
    assert.matches("01%-app_spec.lua:%d+: processor 'p': unknown parent 'nope'", err)
  end)

  it("rejects a processor without process()", function()
    local app = beck.app { id = "t3" }
    app:source("a", "in")
    local ok, err = pcall(app.processor, app, "p", { init = function() end }, "a")
    assert.is_false(ok)
    assert.matches("no process%(ctx, key, value%)", err)
  end)

  it("rejects duplicate names and bad ids", function()
    local app = beck.app { id = "t4" }
    app:source("a", "in")
    assert.has_error(function() app:source("a", "in2") end)
    assert.has_error(function() beck.app { id = "bad id!" } end)
    assert.has_error(function() beck.app "x" end)
  end)

  it("rejects a topic read by two sources", function()
    local app = beck.app { id = "t5" }
    app:source("a", "in")
    app:source("b", "in")
    local ok, err = pcall(app.describe, app)
    assert.is_false(ok)
    assert.matches("read by two sources", err)
  end)

  it("puts processors that share a store in one subtopology", function()
    local app = beck.app { id = "t6" }
    app:source("a", "in-a")
    app:source("b", "in-b")
    app:processor("pa", { process = function() end }, "a")
    app:processor("pb", { process = function() end }, "b")
    app:store("shared", "pa")
    app:connect("shared", "pb")
    local plan = app:describe()
    assert.equal(1, #plan.subtopologies)
    assert.same({ 1, 2 }, plan.subtopologies[1].topics)
    assert.equal(1, plan.stores[1].sub)
    assert.has_error(function() app:connect("nope", "pa") end,
                     "connect: store 'nope' is not declared (app:store)")
  end)
end)
