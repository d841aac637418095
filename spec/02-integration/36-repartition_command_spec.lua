-- `beck repartition` on a running cluster, on both brokers (docs/repartitioning.md): the
-- leader checks the move and writes it to the control topic, every node grows its plan and
-- makes the new generation's topics, and the leader assigns the new tasks over the nodes.
-- A move it refuses is answered to the command, which says why. A node that starts after a
-- move follows it before it takes any task. (The move of records and state while they flow:
-- spec/02-integration/37-online_move_spec.lua.)
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local gen = require "spec.fixtures.generations"

local APP = gen.APP

local function start(bs, id, rack, state)
  return gen.start(bs, id, rack, { "--tasks", "0=5", "--hooks",
                                   "spec/fixtures/repartition_hooks.lua" }, { state = state })
end

local function repartition(bs, sub, n)
  return helpers.run({ helpers.beck_bin(), "repartition", "-b", bs, "--app", APP,
                       "--subtopology", tostring(sub), "--partitions", tostring(n),
                       "--timeout-ms", "20000" }, { timeout = 40 })
end

-- The tasks in node n's latest epoch, by subtopology ("0" -> count).
local function by_sub(n)
  local out = {}
  for _, t in ipairs(cluster.now_of(n).running) do
    local s = t:match("^(%d+)_")
    out[s] = (out[s] or 0) + 1
  end
  return out
end

describe("beck repartition", function()
  after_each(helpers.cleanup)

  it("adds a move that every node follows, answers one it refuses, and a new node follows",
     function()
    local broker = helpers.start_broker { topics = { "stamp-in:3", "stamp-out:3" } }
    local bs = broker.bootstrap
    local sa, sb = helpers.tmpdir(), helpers.tmpdir()
    local nodes = { na = start(bs, "na", "a", sa), nb = start(bs, "nb", "b", sb) }
    helpers.eventually(function()
      return cluster.running(nodes.na) == 5 and cluster.running(nodes.nb) == 5
    end, 40, 0.2)

    local st, out, err = repartition(bs, 0, 8)
    assert.equal(0, st, "beck repartition: " .. err)
    assert.matches("app stamped: subtopology 0 moves to 8 tasks %(move 1; moves so far: 0=8%)",
                   out)
    -- generation 2: its topic and its store's changelog, 8 partitions each
    assert.equal(8, helpers.metadata(bs, "stamped-0-repartition-g2").partitions)
    helpers.eventually(function()
      local md = helpers.metadata(bs, "stamped-counts-changelog-g2")
      return md and md.partitions == 8
    end, 20, 0.2)
    -- both nodes follow, and the leader spreads the 8 new tasks (2_0..2_7) over them
    for _, n in pairs(nodes) do
      n:wait_event("moves", { moves = "0=8", tasks = 18, new = 8, first = "2_0", last = "2_7" }, 20)
    end
    helpers.eventually(function()
      local a, b = by_sub(nodes.na), by_sub(nodes.nb)
      return (a["2"] or 0) > 0 and (b["2"] or 0) > 0 and a["2"] + b["2"] == 8
    end, 20, 0.2)
    -- with no input, the passthrough switches at its next commit all the same: the old
    -- tasks drain and the new ones are built; the old ones, drained, are retired: the
    -- nodes run the 5 passthrough tasks and the 8 new ones
    helpers.eventually(function() return gen.built(nodes, 2) == 8 end, 30, 0.2)
    helpers.eventually(function()
      local a, b = by_sub(nodes.na), by_sub(nodes.nb)
      return not a["0"] and not b["0"] and (a["2"] or 0) + (b["2"] or 0) == 8 and
             cluster.running(nodes.na) + cluster.running(nodes.nb) == 13
    end, 30, 0.2)
    -- its progress, in each node's log and to its on_repartition hook: the move, each of
    -- the 5 old tasks drained, the end
    for _, n in pairs(nodes) do
      local log = n:log()
      assert.matches("move of subtopology 0 to 8 tasks %(generation 2%) complete: the 5 tasks "
                     .. "it replaced have drained", log)
      assert.matches("hooks: repartition moved sub=0 g=2 tasks=8 from=5 drained=%d", log)
      assert.matches("hooks: repartition complete sub=0 g=2 tasks=8 from=5 drained=5", log)
      local last = 0
      for d in log:gmatch("hooks: repartition drained sub=0 g=2 tasks=8 from=5 drained=(%d)") do
        assert.is_true(tonumber(d) > last, "drained counts go up")
        last = tonumber(d)
      end
      assert.equal(5, last)
    end
    -- and to `beck status`: the moves, and the old tasks drained (text and JSON)
    st, out, err = helpers.run({ helpers.beck_bin(), "status", "-b", bs, "--app", APP },
                               { timeout = 30 })
    assert.equal(0, st, err)
    assert.matches("moves: 0=8 %(subtopology=tasks, oldest first%); 5 task%(s%) of replaced "
                   .. "generations drained", out)
    assert.matches("\n0 +retired ", out) -- a replaced generation's task, not a row of dashes
    st, out, err = helpers.run({ helpers.beck_bin(), "status", "-b", bs, "--app", APP, "--json" },
                               { timeout = 30 })
    assert.equal(0, st, err)
    local js = require("cjson").decode(out)
    assert.equal("0=8", js.moves)
    assert.same({ 0, 1, 2, 3, 4 }, js.drained)
    assert.is_true(js.tasks[1].retired)

    -- refused by the leader, which says why to the command
    st, _, err = repartition(bs, 1, 3)
    assert.equal(1, st)
    assert.matches("refused the move: subtopology 1 is the passthrough that feeds subtopology "
                   .. "0's generations: move 0 %(%-%-subtopology 0%)", err)
    st, _, err = repartition(bs, 9, 3)
    assert.equal(1, st)
    assert.matches("refused the move: the topology has no subtopology 9", err)
    st, _, err = repartition(bs, 0, 8)
    assert.equal(1, st)
    assert.matches("refused the move: subtopology 0 runs 8 tasks already", err)
    -- a generation's index, as its tasks are named (2_x), means the subtopology it moves
    st, _, err = repartition(bs, 2, 8)
    assert.equal(1, st)
    assert.matches("refused the move: subtopology 0 runs 8 tasks already", err)
    -- refused by the command itself
    st, _, err = repartition(bs, 0, 5000)
    assert.equal(1, st)
    assert.matches("%-%-partitions 5000: 1 to 4096 tasks can be run", err)

    -- a node killed and started again follows both moves before it takes a task
    st, out, err = repartition(bs, 0, 3)
    assert.equal(0, st, "beck repartition: " .. err)
    assert.matches("moves so far: 0=8,0=3", out)
    helpers.eventually(function() return gen.built(nodes, 3) == 3 end, 30, 0.2)
    nodes.nb:kill()
    nodes.nb = start(bs, "nb", "b", sb)
    -- in one step, or two when its catch-up applies a view between the two moves' records
    nodes.nb:wait_event("moves", { moves = "0=8,0=3", tasks = 21, last = "3_2" }, 30)
    -- the 3 tasks of generation 3 and the 5 passthrough ones; generations 1 and 2 retired
    helpers.eventually(function()
      local a, b = by_sub(nodes.na), by_sub(nodes.nb)
      return (a["3"] or 0) + (b["3"] or 0) == 3 and (a["1"] or 0) + (b["1"] or 0) == 5 and
             cluster.running(nodes.na) + cluster.running(nodes.nb) == 8
    end, 40, 0.2)
    -- it followed the moves (the first of them at least, when its catch-up applied a view
    -- between the two moves' records) before it took any task (it may take none until the
    -- leader spreads the tasks again: na may hold all 8 for a while)
    local first = nodes.nb:wait_event("epoch", function(e) return #e.running > 0 end, 40)
    local followed = nodes.nb:events("moves")[1]
    assert.is_truthy(followed and followed.seq < first.seq,
                     "it took tasks before it followed the moves:\n" .. nodes.nb:events_tail(12))

    if helpers.real_kafka() then
      -- generation 3 seals before it has read a record (its partitions committed at offset
      -- 0 with the seal): the cleanup sees it and empties the older changelogs
      helpers.eventually(function()
        local all = nodes.na:log() .. nodes.nb:log()
        return all:find("cleanup: deleted the records of topic stamped-counts-changelog-g2: " ..
                        "generation 3 of subtopology 0 is sealed", 1, true) ~= nil
      end, 30, 0.3)
    end

    -- the newest generation counts, every key once per record
    local records = {}
    for i = 1, 300 do records[#records + 1] = { "k" .. i, "r" } end
    helpers.produce(bs, "stamp-in", records)
    helpers.eventually(function()
      local a = cluster.committed_total(bs, "stamp-in", APP)
      local b = cluster.committed_total(bs, "stamped-0-repartition-g3", APP)
      return a == 300 and b == 300, string.format("committed %d of stamp-in, %d of g3", a, b)
    end, 60, 0.3)
    local seen = {}
    for _, r in ipairs(helpers.consume(bs, "stamp-out", { timeout = 30 })) do
      assert.is_nil(seen[r.key], "counted twice: " .. r.key)
      seen[r.key] = r.value:match("^(%d+) ")
    end
    for i = 1, 300 do assert.equal("1", seen["k" .. i], "count of k" .. i) end
    -- a query is routed to the key's task of the latest generation, through either node
    local cjson = require "cjson"
    for _, id in ipairs { "na", "nb" } do
      for _, k in ipairs { "k1", "k2", "k77", "k300" } do
        local code, got, e = helpers.run({ helpers.beck_bin(), "get", "-b", bs, "--app", APP,
                                           "--node", id, "counts", k }, { timeout = 30 })
        assert.equal(0, code, "beck get " .. k .. " through " .. id .. ": " .. e)
        local js = assert(cjson.decode(got), got)
        assert.equal("1", js.value, "beck get " .. k)
        assert.equal("3_" .. gen.owner(k, 3), js.task, "beck get " .. k)
      end
    end
    -- a scan reads the 3 tasks of generation 3: every key, once
    st, out, err = helpers.run({ helpers.beck_bin(), "scan", "-b", bs, "--app", APP,
                                 "--node", "nb", "counts", "--limit", "1000" }, { timeout = 30 })
    assert.equal(0, st, "beck scan: " .. err)
    local scanned = 0
    for line in out:gmatch("[^\n]+") do
      for _, it in ipairs(assert(cjson.decode(line), line).items) do
        assert.equal("1", it.value, "scan " .. it.key)
        scanned = scanned + 1
      end
    end
    assert.equal(300, scanned, out:sub(1, 500))
    -- cleanup (docs/repartitioning.md): generations 1 and 2 are retired, so no node keeps
    -- their task directories; generation 1's drained checkpoints are gone too (generation 2,
    -- built from them, has drained), generation 2's stay on the dev broker (a rebuild of
    -- generation 3 takes them); on real Kafka both generations' topics are emptied
    helpers.eventually(function()
      for _, dir in ipairs { sa, sb } do
        for _, t in ipairs(helpers.ls(dir .. "/" .. APP)) do
          if t:match("^[02]_%d+$") then return false, dir .. " keeps task " .. t end
        end
        for _, t in ipairs(helpers.ls(dir .. "/" .. APP .. "/drained")) do
          if t:match("^0_%d+$") then return false, dir .. " keeps drained checkpoint " .. t end
        end
      end
      return true
    end, 20, 0.3)
    local function kept()
      local n = 0
      for _, dir in ipairs { sa, sb } do
        for _, t in ipairs(helpers.ls(dir .. "/" .. APP .. "/drained")) do
          n = n + (t:match("^2_%d+$") and 1 or 0)
        end
      end
      return n
    end
    if not helpers.real_kafka() then
      assert.equal(8, kept(), "generation 2's drained checkpoints")
    else
      -- generation 3 sealed (its changelogs hold its whole state): the changelogs of
      -- generations 1 and 2 are emptied and generation 2's drained checkpoints go too
      helpers.eventually(function() return kept() == 0, kept() .. " kept" end, 30, 0.3)
      helpers.wait_empty(bs, { "stamped-counts-changelog-g1", "stamped-counts-changelog-g2" })
    end
    if helpers.real_kafka() then
      -- emptied, not deleted (engine/kafka.h says why); generation 3's keeps its records
      helpers.wait_empty(bs, { "stamped-0-repartition-g1", "stamped-0-repartition-g2" })
      local records = helpers.records(bs, "stamped-0-repartition-g3")
      assert.is_true(records >= 300, "generation 3's topic holds " .. records)
      assert.matches("cleanup: deleted the records of topic stamped%-0%-repartition%-g1",
                     nodes.na:log() .. nodes.nb:log())
    else
      assert.matches("cleanup: topic stamped%-0%-repartition%-g1 of a retired generation keeps "
                     .. "its records", nodes.na:log())
    end
    for id, n in pairs(nodes) do
      local code = n:stop()
      if code ~= 0 then print(id, n:log():sub(-3000)) end
      assert.equal(0, code)
    end
  end)
end)
