-- Cold bootstrap (runtime/replica/bootstrap.c): a replica on a fresh node is built from a snapshot of
-- the active's RocksDB, fetched over SFTP from a real OpenSSH sshd on 127.0.0.1 (generated
-- host and user keys, spec/fixtures/sshd.lua), instead of by replaying the changelog. Three
-- `beck run --cluster 1` nodes of wordcount with one standby per task; the third joins once
-- a 200,000-word store (100,000 on Kafka) is built, while input keeps flowing. Its replicas must come from
-- snapshots ("installed snapshot" in its log, few changelog records replayed), end equal to
-- the actives' stores key by key (`beck dump`), and every count must be exact.
local helpers = require "spec.helpers"
local sshd_fixture = require "spec.fixtures.sshd"
local cluster = require "spec.fixtures.cluster"

local APP = cluster.APP
-- (half as many on Kafka, whose outside client reads the 10 outputs of each line at a fraction
-- of the dev broker's rate: the suite's 20 minutes)
local L = helpers.real_kafka() and 10000 or 20000 -- lines in the first round
local WORDS = 10 * L

-- Lines of 10 words of a WORDS-word store, keyed so that a word is counted by one task.
local function make_lines(first, last, exact)
  return cluster.spelled_lines(first, last, exact, WORDS)
end

local committed_total, dump = cluster.committed_total, cluster.dump

local function node(bs, id, rack, sshd, state)
  local args = { "--probing-rebalance-interval-ms", "1000",
                 "--ssh-key", sshd.key, "--ssh-known-hosts", sshd.known_hosts,
                 "--ssh-user", sshd.user, "--ssh-host", "127.0.0.1",
                 "--ssh-port", tostring(sshd.port), "--bootstrap-min-records", "1000",
                 "--bootstrap-timeout-ms", "20000",
                 "--hooks", "spec/fixtures/bootstrap_hooks.lua" }
  if state then
    args[#args + 1] = "--state-dir"
    args[#args + 1] = state
  end
  return cluster.start_node(bs, id, rack, cluster.STANDBY, args)
end

describe("cold bootstrap", function()
  after_each(helpers.cleanup)

  it("builds a fresh node's replicas from the actives' snapshots over SSH while input flows; "
     .. "their stores equal the actives' and counts are exact", function()
    local sshd = sshd_fixture.start()
    local broker = helpers.start_broker { topics = { "text-lines:4" } }
    local bs = broker.bootstrap
    local exact = {}
    local states = { na = helpers.tmpdir(), nb = helpers.tmpdir(), nc = helpers.tmpdir() }
    local nodes = { na = node(bs, "na", "a", sshd, states.na),
                    nb = node(bs, "nb", "b", sshd, states.nb) }
    helpers.eventually(function()
      return nodes.na:last_event("epoch") and nodes.nb:last_event("epoch")
    end, 40, 0.2)

    helpers.produce(bs, "text-lines", make_lines(0, L - 1, exact), { timeout = 120 })
    helpers.eventually(function() return committed_total(bs) == L end, 120, 0.5)

    -- the fresh node joins while input keeps flowing
    nodes.nc = node(bs, "nc", "c", sshd, states.nc)
    helpers.produce(bs, "text-lines", make_lines(L, L * 3 / 2 - 1, exact), { timeout = 120 })
    helpers.eventually(function()
      return nodes.nc:last_event("bootstrap_installed")
    end, 90, 0.3)
    helpers.produce(bs, "text-lines", make_lines(L * 3 / 2, 2 * L - 1, exact), { timeout = 120 })
    helpers.eventually(function() return committed_total(bs) == 2 * L end, 120, 0.5)

    assert.is_nil(nodes.nc:last_event("bootstrap_failed"), nodes.nc:events_tail())
    local booted = {}
    for _, e in ipairs(nodes.nc:events("bootstrap_installed")) do booted[#booted + 1] = e.task end
    assert.is_true(#booted >= 1)
    -- the bootstrapped replicas tailed only what came after their snapshots
    -- (a bootstrap that ended just now has its runner restarted at the node's next turn),
    -- unless the warm-up moved the task to nc first: then it was promoted, and runs
    for _, t in ipairs(booted) do
      helpers.eventually(function()
        return nodes.nc:last_event("standby_tailing", { task = t }) or
               nodes.nc:last_event("promoted", { task = t }),
               "standby " .. t .. " does not tail after its bootstrap, nor was promoted"
      end, 30, 0.3)
    end
    -- (log text: on_restore's own output, the hook's feature)
    local log = nodes.nc:log()
    -- and on_restore heard of each, done and ok
    for _, t in ipairs(booted) do
      assert.is_truthy(log:match("hooks: bootstrap " .. t .. " from n[ab] done ok=true 100%% of %d+"),
                       "on_restore of " .. t)
    end
    print(string.format("\n  %d replica(s) built by cold bootstrap on nc: %s", #booted,
                        table.concat(booted, " ")))

    -- the replicas caught up: their lag lines say 0 (or they were promoted and ran)
    helpers.eventually(function()
      local l = nodes.nc:log()
      local last = l:match(".*standbys: ([^\n]*)") or ""
      return not last:match("lag [1-9]")
    end, 60, 0.3)

    local kv = cluster.latest(helpers.consume(bs, "word-counts", { timeout = 120 }))
    local checked = 0
    for w, n in pairs(exact) do
      assert.equal(n, kv[w], "count of " .. w)
      checked = checked + 1
    end
    assert.equal(WORDS, checked)

    -- every replica of every task caught up, as the nodes report it (`beck status`), not
    -- only nc's: a standby on na or nb still behind would hold older counts
    local function all_caught_up()
      -- twice, 3 s apart: a report from before a rebuild's install can still say lag 0 (a
      -- loaded make test once compared a replica that was one update short)
      for _ = 1, 2 do
        helpers.eventually(function()
          for _, t in ipairs(cluster.status_json(bs, APP).tasks) do
            for _, p in ipairs(t.progress or {}) do
              if p.lag ~= 0 then return nil, "task " .. t.task .. " on " .. p.node .. " lag " .. p.lag end
            end
          end
          return true
        end, 60, 0.5)
        helpers.sleep(3)
      end
    end
    all_caught_up()

    -- where each task's replicas are now (the latest epoch line of each node); input has
    -- stopped and every replica caught up, so every copy of a task holds the same
    local holders = {}
    for _, id in ipairs({ "na", "nb", "nc" }) do
      local now = cluster.now_of(nodes[id])
      for _, list in ipairs({ now.running, now.standby }) do
        for _, t in ipairs(list) do
          holders[t] = holders[t] or {}
          holders[t][id] = true
        end
      end
    end
    -- an operator asks for a rebuild of one of nc's standbys: `beck bootstrap`
    local sb_task
    for t, h in pairs(holders) do
      local now = cluster.now_of(nodes.nc)
      local runs = false
      for _, r in ipairs(now.running) do runs = runs or r == t end
      if h.nc and not runs then
        sb_task = sb_task or t
      end
    end
    if sb_task then
      local installs = #nodes.nc:events("bootstrap_installed", { task = sb_task })
      local st, out, err = helpers.run({ helpers.beck_bin(), "bootstrap", "-b", bs, "--app", APP,
                                         "--task", sb_task, "--node", "nc" })
      assert.equal(0, st, err)
      assert.is_truthy(out:match("rebuild task " .. sb_task))
      helpers.eventually(function()
        return #nodes.nc:events("bootstrap_installed", { task = sb_task })
               > installs
      end, 60, 0.3)
      assert.is_truthy(nodes.nc:log():match("bootstrap " .. sb_task .. ": asked by beck%-bootstrap"))
      print("  `beck bootstrap` rebuilt " .. sb_task .. " on nc")
      booted[#booted + 1] = sb_task
    end
    all_caught_up()
    -- no private key material in any log
    for _, id in ipairs({ "na", "nb", "nc" }) do
      -- (log text: the message is the feature, what an operator or a user reads)
      assert.is_nil(nodes[id]:log():match("PRIVATE KEY"), id .. " logs key material")
    end

    for _, id in ipairs({ "na", "nb", "nc" }) do assert.equal(0, nodes[id]:stop()) end
    for _, t in ipairs(booted) do
      local mine, n = dump(states.nc, t)
      local peer = holders[t] and (holders[t].na and "na" or holders[t].nb and "nb")
      assert.is_truthy(peer, "another replica of " .. t)
      local other, m = dump(states[peer], t)
      assert.is_true(n > 0, "nc holds task " .. t)
      assert.equal(m, n, "keys of " .. t)
      for k, v in pairs(other) do assert.equal(v, mine[k], t .. " key " .. k) end
    end
  end)
end)
