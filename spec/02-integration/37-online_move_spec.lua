-- A running count by key moved to another task count while records flow (docs/repartitioning.md,
-- Moving a generation), on both brokers: two nodes, subtopology 0 of
-- spec/fixtures/stamped_count.lua with 5 tasks over a 3-partition input, moved to 8 and then
-- to 3. The passthrough switches to the new generation's topic at a commit after a barrier
-- to the old one; each old task drains to the barriers and leaves a checkpoint of its
-- state; each new task is built from the checkpoints of the old tasks whose key groups
-- overlap its own (those of the other node fetched over SFTP from a real sshd on
-- 127.0.0.1) and then reads its topic.
-- Checked from outside: every key's counts are 1, 2, 3, ... with none missing or repeated
-- across both moves, the records after a move are counted by the task of the new
-- generation that owns the key's group, and no build replayed a changelog record.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local gen = require "spec.fixtures.generations"
local sshd_fixture = require "spec.fixtures.sshd"

local APP = gen.APP
local KEYS = 1500

local states = {}

local function start(bs, id, rack, sshd)
  states[id] = helpers.tmpdir()
  -- (a standby of a later generation asked of an active not built yet hears nothing back:
  -- asked again after bootstrap_timeout_ms)
  return gen.start(bs, id, rack, { "--tasks", "0=5", "--num-standby-replicas", "1",
                                   "--bootstrap-timeout-ms", "4000",
                                   "--ssh-key", sshd.key,
                                   "--ssh-known-hosts", sshd.known_hosts, "--ssh-user", sshd.user,
                                   "--ssh-host", "127.0.0.1", "--ssh-port", tostring(sshd.port) },
                   { state = states[id] })
end

local function round() return gen.round(KEYS) end

-- Moves subtopology 0 to n tasks while two rounds of every key are written.
local function move_while_writing(bs, n)
  local cmd = helpers.spawn({ helpers.beck_bin(), "repartition", "-b", bs, "--app", APP,
                              "--subtopology", "0", "--partitions", tostring(n) },
                            { name = "repartition-" .. n })
  helpers.produce(bs, "stamp-in", round())
  helpers.produce(bs, "stamp-in", round())
  assert.equal(0, cmd:wait(40), "beck repartition: " .. cmd:log())
end

describe("a subtopology moved to another task count while it runs", function()
  after_each(helpers.cleanup)

  it("counts every key exactly, in order, through two moves", function()
    local broker = helpers.start_broker { topics = { "stamp-in:3", "stamp-out:3" } }
    local bs = broker.bootstrap
    local sshd = sshd_fixture.start()
    local nodes = { na = start(bs, "na", "a", sshd), nb = start(bs, "nb", "b", sshd) }
    helpers.eventually(function()
      return cluster.running(nodes.na) == 5 and cluster.running(nodes.nb) == 5
    end, 40, 0.2)
    helpers.produce(bs, "stamp-in", round())

    move_while_writing(bs, 8) -- rounds 2 and 3
    -- the old tasks drain, the new ones are built and start
    helpers.eventually(function()
      return gen.built(nodes, 2) == 8, gen.moves_state(nodes)
    end, 60, 0.3)
    helpers.produce(bs, "stamp-in", round()) -- round 4: generation 2 alone
    -- (forwarded before the next move: a record the passthrough reads after its switch goes
    -- to generation 3)
    helpers.eventually(function()
      local n = cluster.committed_total(bs, "stamp-in", APP)
      return n == 4 * KEYS, string.format("%d of stamp-in's %d records committed", n, 4 * KEYS)
    end, 60, 0.3)

    move_while_writing(bs, 3) -- rounds 5 and 6
    helpers.eventually(function()
      return gen.built(nodes, 3) == 3, gen.moves_state(nodes)
    end, 60, 0.3)
    helpers.produce(bs, "stamp-in", round()) -- round 7: generation 3 alone
    local total = 7 * KEYS
    helpers.eventually(function()
      local n = cluster.committed_total(bs, "stamp-in", APP)
      return n == total, string.format("%d of stamp-in's %d records committed", n, total)
    end, 90, 0.5)

    -- every key counted 1..7 in order, each once; rounds 4 and 7 by the generation that
    -- ran alone then, in the task owning the key's group
    local seen, outputs = {}, 0
    helpers.eventually(function()
      local list = helpers.consume(bs, "stamp-out", { timeout = 30 })
      outputs = #list
      if outputs < total then return false end
      seen = {}
      for _, r in ipairs(list) do
        local n, task = r.value:match("^(%d+) %d+ %d+ %S+ (%S+)$")
        seen[r.key] = seen[r.key] or {}
        table.insert(seen[r.key], { tonumber(n), task })
      end
      return true
    end, 60, 1)
    assert.equal(total, outputs, "outputs (none missing, none repeated)")
    for i = 1, KEYS do
      local k = "k" .. i
      local got = seen[k]
      assert.equal(7, #got, "outputs of " .. k)
      for j = 1, 7 do assert.equal(j, got[j][1], "count " .. j .. " of " .. k) end
      assert.equal("2_" .. gen.owner(k, 8), got[4][2], "task of " .. k .. "'s 4th record")
      assert.equal("3_" .. gen.owner(k, 3), got[7][2], "task of " .. k .. "'s 7th record")
    end
    -- every new task built from drained checkpoints, none by a changelog replay; those of
    -- the other node fetched (the first placement puts new tasks beside the passthroughs)
    local builds, fetched, where = 0, 0, {}
    for id, n in pairs(nodes) do
      for _, e in ipairs(n:events("built")) do
        builds = builds + 1
        where[id] = true
        assert.is_true(e.checkpoints > 0 and e.replayed == 0, e.task .. " built from "
                       .. e.checkpoints .. " checkpoint(s), " .. e.replayed .. " replayed")
      end
      if #n:events("drained") > 0 then where[id] = true end
      fetched = fetched + #n:events("checkpoint_fetched")
      -- each task's life there: a replaced generation's task that drained went draining,
      -- checkpointing, drained; a built one building, then live (sealing meanwhile)
      for _, e in ipairs(n:events("drained")) do
        local chain = {}
        for _, m in ipairs(n:events("task", { task = e.task })) do chain[#chain + 1] = m.to end
        assert.matches("draining checkpointing drained", table.concat(chain, " "), 1, true)
      end
      for _, e in ipairs(n:events("built")) do
        assert.is_table(n:last_event("task", { task = e.task, to = "building" }),
                        e.task .. " built without going through building")
      end
    end
    assert.is_true(builds >= 11, "builds: " .. builds)
    -- (when one node drained every old task and built every new one, as the placement by
    -- origin does when the old tasks ran there, nothing needs a fetch)
    assert.is_true(fetched > 0 or not (where.na and where.nb),
                   "no drained checkpoint was fetched from the other node")
    -- the standby of each task of generation 3 has the state its active was built from
    -- (its changelog alone does not hold it before the seal): a snapshot of the built
    -- active, fetched by cold bootstrap, or the node's own build when it gave the task up
    helpers.eventually(function()
      local n = gen.standbys_with_built_state(nodes, 3)
      return n == 3, n .. " of generation 3's standbys have its built state"
    end, 40, 0.3)
    -- each task of generation 3 seals: its changelog gets its whole state; then on real
    -- Kafka the changelogs of generations 1 and 2 are emptied (nothing restores from them)
    helpers.eventually(function()
      local seen, n = {}, 0
      for _, node in pairs(nodes) do
        for _, e in ipairs(node:events("sealed")) do
          local t = e.task
          if t:match("^3_") and not seen[t] then seen[t], n = true, n + 1 end
        end
      end
      return n == 3, n .. " of generation 3's tasks sealed"
    end, 40, 0.3)
    if helpers.real_kafka() then
      helpers.wait_empty(bs, { "stamped-counts-changelog-g1", "stamped-counts-changelog-g2" })
    end
    local state_of = {} -- task -> the state directory of the node running it last
    for id, n in pairs(nodes) do
      for _, task in ipairs(cluster.now_of(n).running) do state_of[task] = states[id] end
    end
    for id, n in pairs(nodes) do
      local code = n:stop()
      assert.equal(0, code, id .. ": " .. n:last_words())
    end
    -- each task of generation 3 holds exactly the keys of its groups, each counted 7 times
    local stored = 0
    for q = 0, 2 do
      local task = "3_" .. q
      assert.is_truthy(state_of[task], "no node runs " .. task)
      local kv, n = cluster.dump(state_of[task], task, APP, "counts")
      for k, v in pairs(kv) do
        assert.equal(q, gen.owner(k, 3), "key " .. k .. " in task " .. task)
        assert.equal("7", v, "stored count of " .. k)
      end
      stored = stored + n
    end
    assert.equal(KEYS, stored)

    -- both nodes start again on empty disks: generation 3 is restored from its own
    -- changelogs (on Kafka the only ones left with records), and counts on from 7
    nodes = { na = start(bs, "na", "a", sshd), nb = start(bs, "nb", "b", sshd) }
    helpers.eventually(function()
      return cluster.running(nodes.na) + cluster.running(nodes.nb) == 8
    end, 60, 0.3)
    helpers.produce(bs, "stamp-in", round()) -- round 8
    helpers.eventually(function()
      local n = cluster.committed_total(bs, "stamp-in", APP)
      return n == total + KEYS, string.format("%d of stamp-in's %d records committed", n,
                                              total + KEYS)
    end, 90, 0.5)
    local last = {}
    helpers.eventually(function()
      local list = helpers.consume(bs, "stamp-out", { timeout = 30 })
      if #list < total + KEYS then return false, #list .. " outputs" end
      for _, r in ipairs(list) do last[r.key] = tonumber(r.value:match("^(%d+) ")) end
      return true
    end, 60, 1)
    for i = 1, KEYS do assert.equal(8, last["k" .. i], "count of k" .. i .. " after a restart") end
    if helpers.real_kafka() then
      -- the restarted nodes read the seals from the app's commits: the tasks restore from
      -- their own changelogs, with no build and no wait for the old checkpoints
      -- (each of the 3 tasks once at least: one opened on a node and then moved to the
      -- other as both join says it twice, as under the sanitizers)
      local all = nodes.na:log() .. nodes.nb:log()
      local tasks, n = {}, 0
      local sealed = "task (%d+_%d+): generation 3 of subtopology 0 is sealed: restored from " ..
                     "its own changelogs, not built"
      for t in all:gmatch(sealed) do
        if not tasks[t] then n = n + 1 end
        tasks[t] = true
      end
      assert.equal(3, n, "tasks restored from their own changelogs alone")
    end
    for id, n in pairs(nodes) do
      assert.equal(0, n:stop(), id .. ": " .. n:last_words())
    end
  end)
end)
