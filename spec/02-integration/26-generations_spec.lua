-- A subtopology with a task count of its own (the `tasks` setting, docs/repartitioning.md):
-- a count by key (spec/fixtures/stamped_count.lua) runs 5 tasks over an input of 3
-- partitions, on two nodes, each its own process. The input is read by a passthrough
-- subtopology that forwards every record to stamped-0-repartition-g1 (5 partitions, by key
-- group); each of the 5 tasks owns a range of key groups. Checked from outside: every
-- record of a key was counted by the task owning the key's group, each key's counts are 1,
-- 2, ... in order, a key is read (`beck get`) through a node that may not own it, and each
-- task's store (`beck dump`) holds only its groups. Then the starts that would leave that
-- state behind are refused: without the setting, and with another count.
local cjson = require "cjson.safe"
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local gen = require "spec.fixtures.generations"

local KEYS = 3000
local TASKS = 5
local APP = gen.APP
local GEN_TOPIC = gen.GEN_TOPIC

local function owner(key) return gen.owner(key, TASKS) end

local function start(bs, id, rack, state, extra)
  return gen.start(bs, id, rack, extra or { "--tasks", "0=" .. TASKS }, { state = state })
end

describe("a subtopology given its own task count", function()
  after_each(helpers.cleanup)

  it("runs its tasks by key group over fewer input partitions, and keeps its state",
     function()
    local broker = helpers.start_broker { topics = { "stamp-in:3", "stamp-out:3" } }
    local bs = broker.bootstrap
    local sa, sb = helpers.tmpdir(), helpers.tmpdir()
    local nodes = { na = start(bs, "na", "a", sa), nb = start(bs, "nb", "b", sb) }
    -- 5 counting tasks and 5 passthrough tasks (task q reading the input partitions p with
    -- p mod 5 = q: 1_3 and 1_4 read nothing yet): 5 each
    helpers.eventually(function()
      return cluster.running(nodes.na) == 5 and cluster.running(nodes.nb) == 5
    end, 40, 0.2)
    assert.equal(TASKS, helpers.metadata(bs, GEN_TOPIC).partitions, "partitions of " .. GEN_TOPIC)

    -- key k<i> counted 1 + i % 3 times, the keys' records interleaved
    local records, want, total = {}, {}, 0
    for round = 1, 3 do
      for i = 1, KEYS do
        if round <= 1 + i % 3 then
          records[#records + 1] = { "k" .. i, "r" .. round }
          want["k" .. i] = round
          total = total + 1
        end
      end
    end
    helpers.produce(bs, "stamp-in", records, { timeout = 60 })
    helpers.eventually(function()
      return cluster.committed_total(bs, "stamp-in", APP) == total and
             cluster.committed_total(bs, GEN_TOPIC, APP) == total
    end, 60, 0.3)

    -- every record of a key counted in order by the task owning its group, once
    local seen, tasks_used = {}, {}
    for _, r in ipairs(helpers.consume(bs, "stamp-out", { timeout = 60 })) do
      local n, task = r.value:match("^(%d+) %d+ %d+ %S+ (%S+)$")
      assert.equal("0_" .. owner(r.key), task, "task of " .. r.key)
      tasks_used[task] = true
      local last = seen[r.key] or 0
      assert.equal(last + 1, tonumber(n), "count of " .. r.key .. " after " .. last)
      seen[r.key] = tonumber(n)
    end
    for k, n in pairs(want) do assert.equal(n, seen[k], "final count of " .. k) end
    for q = 0, TASKS - 1 do assert.is_true(tasks_used["0_" .. q], "task 0_" .. q) end

    -- a key read through node na, wherever its task runs
    for _, k in ipairs { "k1", "k2", "k3", "k1000", "k2999" } do
      local st, out, err = helpers.run({ helpers.beck_bin(), "get", "-b", bs, "--app", APP,
                                         "--node", "na", "counts", k }, { timeout = 30 })
      assert.equal(0, st, "beck get " .. k .. ": " .. err)
      local got = assert(cjson.decode(out), out)
      assert.equal(tostring(want[k]), got.value, "beck get " .. k)
      assert.equal("0_" .. owner(k), got.task, "beck get " .. k)
    end
    local state_of = {} -- task -> the state directory of the node running it last
    for id, n in pairs(nodes) do
      for _, task in ipairs(cluster.now_of(n).running) do
        state_of[task] = id == "na" and sa or sb
      end
    end
    -- beck status names the tasks as the nodes do: 5 counting tasks and 5 passthrough ones,
    -- though the input has 3 partitions
    local st, out, err = helpers.run({ helpers.beck_bin(), "status", "-b", bs, "--app", APP,
                                       "--json", "spec/fixtures/stamped_count.lua" },
                                     { timeout = 30, env = { BECK_TASKS = "0=" .. TASKS } })
    assert.equal(0, st, "beck status: " .. err)
    local names = {}
    for _, t in ipairs(assert(cjson.decode(out), out).tasks) do names[#names + 1] = t.name end
    assert.same({ "0_0", "0_1", "0_2", "0_3", "0_4", "1_0", "1_1", "1_2", "1_3", "1_4" }, names)

    for _, n in pairs(nodes) do assert.equal(0, n:stop()) end

    -- each task's store holds the keys of its groups, and all of them
    local stored = 0
    for q = 0, TASKS - 1 do
      local task = "0_" .. q
      assert.is_truthy(state_of[task], "no node runs " .. task)
      local kv, n = cluster.dump(state_of[task], task, APP, "counts")
      for k, v in pairs(kv) do
        assert.equal(q, owner(k), "key " .. k .. " in task " .. task)
        assert.equal(tostring(want[k]), v, "stored count of " .. k)
      end
      stored = stored + n
    end
    assert.equal(KEYS, stored)

    -- the state is in the generation's changelog: a start without the setting, or with
    -- another count, would not read it, and is refused
    local plain = start(bs, "nc", "a", helpers.tmpdir(), {})
    assert.is_not.equal(0, plain:wait(30))
    assert.matches("store counts keeps its state in changelog stamped%-counts%-changelog%-g1",
                   plain:log())
    local other = start(bs, "nd", "a", helpers.tmpdir(), { "--tasks", "0=4" })
    assert.is_not.equal(0, other:wait(30))
    assert.matches("topic stamped%-0%-repartition%-g1 has 5 partitions, and the `tasks` " ..
                   "setting gives subtopology 0 4 tasks", other:log())
  end)
end)
