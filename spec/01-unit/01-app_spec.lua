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

  it("gives a subtopology with a task count of its own (tasks) a generation and a passthrough",
     function()
    local app = beck.app { id = "t9", tasks = "1=5" }
    app:source("a", "in-a")
    app:sink("s", "out", "a")
    app:source("b", { "in-b", "in-c" })
    app:processor("p", { process = function() end }, "b")
    app:store("st", "p")
    app:store("cache", { changelog = false }, "p")
    local plan = app:describe()
    local names = {}
    for i, t in ipairs(plan.topics) do names[i] = t.name end
    assert.same({ "in-a", "in-b", "in-c", "out", "t9-1-repartition-g1-0",
                  "t9-1-repartition-g1-1" }, names)
    -- subtopology 1 reads its generation's topics, 5 partitions by key group
    local sub = plan.subtopologies[2]
    assert.same({ 5, 6 }, sub.topics)
    assert.equal(5, sub.tasks)
    assert.equal(1, sub.generation)
    for i = 5, 6 do
      local t = plan.topics[i]
      assert.is_true(t.keygroups and t.internal and t.source)
      assert.equal(5, t.partitions)
      assert.equal(2, t.sub)
    end
    -- the passthrough subtopology, appended, reads the input and forwards it
    local pass = plan.subtopologies[3]
    assert.is_true(pass.passthrough)
    assert.equal(2, pass.of)
    assert.same({ 2, 3 }, pass.topics)
    assert.same({ 3, 5, 6 }, { plan.topics[2].sub, plan.topics[2].pass_to, plan.topics[3].pass_to })
    assert.equal("t9-1-repartition-g1-1", plan.gen_topic["in-c"])
    -- subtopology 0 is as it was
    assert.same({ 1 }, plan.subtopologies[1].topics)
    assert.is_nil(plan.topics[1].pass_to)
    -- the generation's changelog; the other name is checked at start
    local st = plan.stores[plan.store_index.st]
    assert.equal("t9-st-changelog-g1", st.changelog)
    assert.equal("t9-st-changelog", st.changelog_other)
    assert.is_nil(plan.stores[plan.store_index.cache].changelog_other)
    -- the logical plan (the test driver's) has none of it
    local logical = app:describe { logical = true }
    assert.equal(2, #logical.subtopologies)
    assert.equal(4, #logical.topics)
    assert.equal("t9-st-changelog", logical.stores[1].changelog)
  end)

  it("appends each later generation as a subtopology, so earlier indices stay", function()
    local function app_t12()
      local app = beck.app { id = "t12", tasks = "1=8" }
      app:source("a", "in-a")
      app:sink("s", "out", "a")
      app:source("b", { "in-b", "in-c" })
      app:processor("p", { process = function() end }, "b")
      app:store("st", "p")
      app:store("cache", { changelog = false }, "p")
      return app
    end
    local before = app_t12():describe()
    local nt, ns, nst = #before.topics, #before.subtopologies, #before.stores
    -- the runtime sets the moves made so far (the control topic's), not the topology
    local moved = app_t12()
    moved.config.generations = "1=12,1=5"
    local plan = moved:describe()
    -- everything of the plan without moves, at the same indices
    for i = 1, nt do assert.equal(before.topics[i].name, plan.topics[i].name) end
    for i = 1, ns do assert.same(before.subtopologies[i].topics, plan.subtopologies[i].topics) end
    for i = 1, nst do assert.equal(before.stores[i].changelog, plan.stores[i].changelog) end
    -- then generation 2 (12 tasks) and 3 (5 tasks) of subtopology 1
    assert.equal(ns + 2, #plan.subtopologies)
    local names = {}
    for i = nt + 1, #plan.topics do names[#names + 1] = plan.topics[i].name end
    assert.same({ "t12-1-repartition-g2-0", "t12-1-repartition-g2-1",
                  "t12-1-repartition-g3-0", "t12-1-repartition-g3-1" }, names)
    for k, want in ipairs({ { g = 2, n = 12 }, { g = 3, n = 5 } }) do
      local sub = plan.subtopologies[ns + k]
      assert.same({ want.g, want.n, 2 }, { sub.generation, sub.tasks, sub.of })
      assert.same(plan.subtopologies[2].sources, sub.sources)
      assert.equal(string.format("t12-1-repartition-g%d-1", want.g), sub.gen_topic["in-c"])
      for _, ti in ipairs(sub.topics) do
        local t = plan.topics[ti]
        assert.same({ true, true, true, want.n, ns + k, want.g },
                    { t.keygroups, t.internal, t.source, t.partitions, t.sub, t.generation })
      end
      -- its stores: copies of subtopology 1's, logged to the generation's changelog
      local mine = {}
      for _, st in ipairs(plan.stores) do
        if st.sub == ns + k then mine[#mine + 1] = st.name .. " " .. tostring(st.changelog) end
      end
      assert.same({ "st t12-st-changelog-g" .. want.g, "cache t12-cache-changelog-g" .. want.g },
                  mine)
    end
    assert.equal("t12-1-repartition-g1-1", plan.subtopologies[2].gen_topic["in-c"])
    -- the input is still forwarded to generation 1's topics (the move switches it)
    assert.equal("t12-1-repartition-g1-0", plan.topics[plan.topics[2].pass_to].name)
  end)

  it("says what is wrong with a generation", function()
    local function plan_of(tasks, gens)
      local app = beck.app { id = "t13", tasks = tasks }
      app:source("a", "in-a")
      app:sink("s", "out", "a")
      app.config.generations = gens
      return app:describe()
    end
    assert.has_error(function() plan_of("0=2", "0") end,
                     "generations: '0' is not S=N (a subtopology of 0 to 0 and a task count " ..
                     "of 1 to 4096)")
    assert.has_error(function() plan_of("0=2", "1=3") end,
                     "generations: '1=3' is not S=N (a subtopology of 0 to 0 and a task count " ..
                     "of 1 to 4096)")
    assert.equal(3, #plan_of("0=2", "0=3").subtopologies)
    -- from generation 0 (no `tasks`): the move adds the passthrough and generation 1, and
    -- the input is the passthrough's
    local moved = plan_of(nil, "0=3")
    assert.equal(3, #moved.subtopologies)
    assert.is_true(moved.subtopologies[2].passthrough)
    assert.equal(3, moved.subtopologies[2].tasks)
    assert.equal(1, moved.subtopologies[3].generation)
    assert.equal(2, moved.topics[moved.topic_index["in-a"]].sub)
    assert.equal("t13-0-repartition-g1", moved.gen_topic["in-a"])
  end)

  it("says what is wrong with the tasks setting", function()
    local function plan_of(tasks)
      local app = beck.app { id = "t10", tasks = tasks }
      app:source("a", "in-a")
      app:sink("s", "out", "a")
      return app:describe()
    end
    assert.has_error(function() plan_of("0") end,
                     "setting 'tasks': '0' is not S=N (a subtopology and a task count)")
    assert.has_error(function() plan_of("1=4") end,
                     "setting 'tasks': the app has subtopologies 0 to 0, not 1")
    assert.has_error(function() plan_of("0=0") end,
                     "setting 'tasks': subtopology 0: the task count must be 1 to 4096, got 0")
    assert.has_error(function() plan_of("0=2,0=3") end,
                     "setting 'tasks': subtopology 0 is given twice")
    assert.equal(3, plan_of(" 0 = 3 ").subtopologies[1].tasks)
    assert.equal(1, #plan_of("").subtopologies)
    local app = beck.app { id = "t11", tasks = "0=2" }
    app:source("a", "in-a")
    app:sink("s", "t11-0-repartition-g1", "a")
    assert.has_error(function() app:describe() end,
                     "topic t11-0-repartition-g1 is the app's own (subtopology 0's generation " ..
                     "1): the topology may not use it")
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
