-- Standby replicas of a later generation without cold bootstrap (docs/repartitioning.md,
-- Standbys of a later generation), on both brokers: two nodes with one standby per task and
-- no ssh_key count by key; subtopology 0 is moved from 5 to 4 tasks. Each new task's
-- standby waits until the tasks it is built from have drained, builds itself from their
-- changelogs as its active did, and tails its own changelog: `beck status` shows it built
-- and caught up (a real lag, never the "not built" sentinel). Then a node running new tasks
-- is killed: the other promotes its replicas, which replay only the tail of their
-- changelogs (no build), and every key's count stays exact.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local gen = require "spec.fixtures.generations"

local KEYS = 800

local function start(bs, id, rack, state)
  return gen.start(bs, id, rack, { "--tasks", "0=5", "--num-standby-replicas", "1" },
                   { state = state })
end

-- The generation-2 tasks of the latest `beck status`, each with its replicas' progress: the
-- last 4 of the app's tasks (numbered subtopology by subtopology, a move's new subtopology
-- last), named 2_0..2_3 as the nodes name them.
local function gen2(bs)
  local tasks = cluster.status_json(bs, gen.APP).tasks
  local out = {}
  for i = #tasks - 3, #tasks do
    local t = tasks[i]
    if t and not t.retired then
      t.name = "2_" .. (i - (#tasks - 3))
      out[#out + 1] = t
    end
  end
  return out, #tasks .. " tasks"
end

describe("a later generation's standbys without cold bootstrap", function()
  after_each(helpers.cleanup)

  it("build from the changelogs, tail, and a failover replays only the tail", function()
    local broker = helpers.start_broker { topics = { "stamp-in:3", "stamp-out:3" } }
    local bs = broker.bootstrap
    local dirs = { na = helpers.tmpdir(), nb = helpers.tmpdir() }
    local nodes = { na = start(bs, "na", "a", dirs.na), nb = start(bs, "nb", "b", dirs.nb) }
    helpers.eventually(function()
      return cluster.running(nodes.na) == 5 and cluster.running(nodes.nb) == 5
    end, 60, 0.2)
    helpers.produce(bs, "stamp-in", gen.round(KEYS))
    gen.move(bs, 4)
    helpers.produce(bs, "stamp-in", gen.round(KEYS))
    helpers.eventually(function()
      return gen.built(nodes, 2) == 4, gen.moves_state(nodes)
    end, 60, 0.2)

    -- every new task's replica is built on the node that does not run it, and catches up
    helpers.eventually(function()
      local tasks, names = gen2(bs)
      if #tasks ~= 4 then return false, #tasks .. " generation-2 task(s) in beck status: " .. names end
      for _, t in ipairs(tasks) do
        local warm = false
        for _, p in ipairs(t.progress) do
          if p.node ~= t.active and p.built and p.lag == 0 and p.offset > 0 then warm = true end
        end
        if not warm then
          return false, t.name .. ": no standby built and caught up: " ..
                        require("cjson").encode(t.progress)
        end
      end
      return true
    end, 60, 0.5)
    local built_by_standby = 0
    for _, n in pairs(nodes) do
      for _, e in ipairs(n:events("standby_built")) do
        if e.task:match("^2_") then built_by_standby = built_by_standby + 1 end
      end
    end
    assert.is_true(built_by_standby >= 4, "standby builds: " .. built_by_standby)

    -- a failover to the replicas: no build, only the tail of the own changelog replayed
    local victim, survivor, moved = "na", "nb", {}
    for _, t in ipairs(cluster.now_of(nodes.nb).running) do
      if t:match("^2_") then moved[#moved + 1] = t end
    end
    if #moved > 0 then
      victim, survivor = "nb", "na"
    else
      for _, t in ipairs(cluster.now_of(nodes.na).running) do
        if t:match("^2_") then moved[#moved + 1] = t end
      end
    end
    assert.is_true(#moved > 0, "no node runs a generation-2 task")
    local mark = #nodes[survivor]:events()
    nodes[victim]:kill()
    helpers.eventually(function()
      local running = {}
      for _, t in ipairs(cluster.now_of(nodes[survivor]).running) do running[t] = true end
      for _, t in ipairs(moved) do
        if not running[t] then return false end
      end
      return true
    end, 60, 0.2)
    helpers.produce(bs, "stamp-in", gen.round(KEYS))
    local out
    helpers.eventually(function()
      out = helpers.consume(bs, "stamp-out", { timeout = 30 })
      local bad = gen.sequences(out, KEYS, 3)
      return #bad == 0, table.concat(bad, "; ")
    end, 60, 1)
    local after = {}
    for i, e in ipairs(nodes[survivor]:events()) do
      if i > mark then after[#after + 1] = e end
    end
    for _, t in ipairs(moved) do
      local restore
      for _, e in ipairs(after) do
        assert.is_false(e.kind == "built" and e.task == t, t .. " was built again after the "
                        .. "failover")
        if e.kind == "restore_store" and e.task == t and e.store == "counts" then restore = e end
      end
      assert.is_table(restore, "no restore of " .. t .. " after the failover")
      assert.is_true(restore.records < KEYS / 4,
                     t .. " replayed " .. restore.records .. " changelog record(s): more than a tail")
    end
  end)
end)
