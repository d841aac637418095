-- An input topic that grows while the app runs (docs/repartitioning.md, Input that grows), on
-- a real Apache Kafka (the dev broker cannot add partitions). A count by key
-- (spec/fixtures/stamped_count.lua) runs with its own task count (--tasks 0=4) on two nodes:
-- its passthrough task q reads every input partition p with p mod 4 = q. The input grows from
-- 6 to 10 partitions with CreatePartitions (the outside client's admin call) between two
-- rounds of the same keys, which then land on other partitions: the passthrough tasks take
-- the new partitions from their start, every key's state stays with the task owning its key
-- group, and each key is counted 1, 2, 3 in order, exactly. Kafka Streams stops here. A
-- second app reading the same input by input partition (no `tasks`: generation 0, 6 tasks)
-- follows too: its leader moves it to generation 1 with its 6 tasks (node/node_growth.c),
-- whose passthrough reads the new partitions, and its counts are exact as well.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local gen = require "spec.fixtures.generations"

local KEYS = 2000
local TASKS = 4
local APP = gen.APP
local GEN_TOPIC = gen.GEN_TOPIC

local function owner(key) return gen.owner(key, TASKS) end

local function start(bs, id, rack, extra, env)
  return gen.start(bs, id, rack, extra, { env = env })
end

describe("an input topic that grows", function()
  after_each(helpers.cleanup)

  it("is followed by a subtopology with its own task count, every count exact", function()
    if not helpers.real_kafka() then
      pending("needs BECK_SPEC_BACKEND=kafka: the dev broker cannot add partitions")
      return
    end
    local broker = helpers.start_broker { topics = { "stamp-in:6", "stamp-out:4",
                                                     "stamp-out0:4" } }
    local bs = broker.bootstrap
    local tasks = { "--tasks", "0=" .. TASKS }
    local nodes = { na = start(bs, "na", "a", tasks), nb = start(bs, "nb", "b", tasks) }
    local plain = start(bs, "nc", "c", { "--id", "stamped0" }, { STAMP_OUT = "stamp-out0" })
    helpers.eventually(function()
      return cluster.running(nodes.na) == TASKS and cluster.running(nodes.nb) == TASKS
    end, 60, 0.2)

    local function round(r)
      local records = {}
      for i = 1, KEYS do records[i] = { "k" .. i, "r" .. r } end
      helpers.produce(bs, "stamp-in", records, { timeout = 60 })
      helpers.eventually(function()
        return cluster.committed_total(bs, "stamp-in", APP) == r * KEYS and
               cluster.committed_total(bs, GEN_TOPIC, APP) == r * KEYS
      end, 60, 0.3)
    end
    round(1)
    assert(helpers.kafka_client({ "grow", bs, "stamp-in", "10" }))
    -- each node's threads see it within seconds; partitions 6..9 go to tasks 1_2 1_3 1_0 1_1
    helpers.eventually(function()
      local seen = 0
      for p = 6, 9 do
        for _, n in pairs(nodes) do
          seen = seen + #n:events("input_grown", { topic = "stamp-in", partition = p, from = 6,
                                                   to = 10 })
        end
      end
      return seen == 4, seen .. " of the new partitions taken"
    end, 30, 0.3)
    round(2)
    round(3)
    -- the new partitions were written to and read
    local committed = helpers.committed(bs, "stamp-in", APP)
    local beyond = 0
    for p = 6, 9 do beyond = beyond + (committed[p] or 0) end
    assert.is_true(beyond > 0, "nothing was read from the new partitions")

    local seen = {}
    for _, r in ipairs(helpers.consume(bs, "stamp-out", { timeout = 60 })) do
      local n, task = r.value:match("^(%d+) %d+ %d+ %S+ (%S+)$")
      assert.equal("0_" .. owner(r.key), task, "task of " .. r.key)
      assert.equal((seen[r.key] or 0) + 1, tonumber(n), "count of " .. r.key)
      seen[r.key] = tonumber(n)
    end
    for i = 1, KEYS do assert.equal(3, seen["k" .. i], "final count of k" .. i) end

    -- the app read by input partition: moved to generation 1 (subtopology 2, 6 tasks, fed
    -- by the passthrough, subtopology 1) and every key counted 1, 2, 3, each once; what
    -- came after the move by the task of generation 1 owning the key's group
    assert.matches("input topic stamp%-in grew from 6 to 10 partitions: subtopology 0, which " ..
                   "reads it by input partition, moves to generation 1 with its 6 tasks",
                   plain:log())
    -- (the passthrough's commits come first; the tasks of generation 1 count after them)
    helpers.eventually(function()
      return cluster.committed_total(bs, "stamp-in", "stamped0") == 3 * KEYS and
             helpers.count(bs, "stamp-out0") >= 3 * KEYS
    end, 90, 0.5)
    local counts, outputs = {}, 0
    for _, r in ipairs(helpers.consume(bs, "stamp-out0", { timeout = 60 })) do
      local n, task = r.value:match("^(%d+) %d+ %d+ %S+ (%S+)$")
      n = tonumber(n)
      outputs = outputs + 1
      assert.equal((counts[r.key] or 0) + 1, n, "count of " .. r.key .. " (plain app)")
      counts[r.key] = n
      if task:sub(1, 2) == "2_" then
        assert.equal("2_" .. gen.owner(r.key, 6), task, "generation 1's task of " .. r.key)
      else
        assert.matches("^0_[0-5]$", task)
      end
    end
    assert.equal(3 * KEYS, outputs, "outputs of the plain app (none missing or repeated)")
    for i = 1, KEYS do assert.equal(3, counts["k" .. i], "final count of k" .. i .. " (plain)") end
    assert.equal(0, plain:stop(), plain:last_words())

    -- it grows again while the plain app is down: started again, generation 0 keeps the
    -- width of its changelog (6 tasks, as the other nodes' task tables and the moves
    -- expect), and the passthrough reads the two new partitions too
    assert(helpers.kafka_client({ "grow", bs, "stamp-in", "12" }))
    plain = start(bs, "nc", "c", { "--id", "stamped0" }, { STAMP_OUT = "stamp-out0" })
    helpers.eventually(function() return cluster.running(plain) == 12 end, 60, 0.3)
    assert.matches("subtopology 0 reads stamp%-in, which has 12 partitions now, by input " ..
                   "partition, and its state is in 6", plain:log())
    local records = {}
    for i = 1, KEYS do records[i] = { "k" .. i, "r4" } end
    helpers.produce(bs, "stamp-in", records, { timeout = 60 })
    helpers.eventually(function()
      return cluster.committed_total(bs, "stamp-in", "stamped0") == 4 * KEYS
    end, 60, 0.3)
    local last = {}
    helpers.eventually(function()
      local list = helpers.consume(bs, "stamp-out0", { timeout = 60 })
      if #list < 4 * KEYS then return false, #list .. " outputs" end
      for _, r in ipairs(list) do last[r.key] = tonumber(r.value:match("^(%d+) ")) end
      return true
    end, 60, 1)
    for i = 1, KEYS do assert.equal(4, last["k" .. i], "count of k" .. i .. " after a restart") end
    assert.equal(0, plain:stop(), plain:last_words())
  end)
end)
