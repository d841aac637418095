-- Cold bootstrap on a full disk (issue 20, docs/reliability.md#a-full-disk): a fresh node
-- joins two others while its state directory has 150 KB left (spec/fixtures/faultfs.c,
-- preloaded: writes there fail ENOSPC past that). Its snapshot fetches fail; each says so,
-- leaves no partial files, and its standbys fall back to the changelog, which the full
-- disk refuses too: the runner stops and says why, and the node waits for the next change,
-- while the other nodes go on. Started again with room, the node builds its replicas and
-- they end equal to the actives' stores. The disk is what this is about: dev broker only.
local helpers = require "spec.helpers"
local sshd_fixture = require "spec.fixtures.sshd"
local cluster = require "spec.fixtures.cluster"

local WORDS = 50000

local function args(sshd, state)
  return { "--probing-rebalance-interval-ms", "1000",
           "--ssh-key", sshd.key, "--ssh-known-hosts", sshd.known_hosts,
           "--ssh-user", sshd.user, "--ssh-host", "127.0.0.1",
           "--ssh-port", tostring(sshd.port), "--bootstrap-min-records", "1000",
           "--bootstrap-timeout-ms", "20000", "--state-dir", state }
end

local function node(bs, id, rack, sshd, state, env)
  local argv = { "-b", bs, "--cluster", "1", "--node-id", id, "--rack", rack,
                 "--commit-interval-ms", "300" }
  for _, list in ipairs({ cluster.STANDBY, args(sshd, state) }) do
    for _, a in ipairs(list) do argv[#argv + 1] = a end
  end
  return helpers.start_node(cluster.WORDCOUNT, argv, { name = id, env = env })
end

describe("cold bootstrap on a full disk", function()
  after_each(helpers.cleanup)

  if helpers.real_kafka() then
    it("fails cleanly and builds the replicas once there is room", function()
      pending("the disk, not the broker: on the dev broker only")
    end)
    return
  end

  it("fails cleanly, keeps the other nodes going, and builds the replicas once there is room",
     function()
    local sshd = sshd_fixture.start()
    local broker = helpers.start_broker { topics = { "text-lines:4" } }
    local bs = broker.bootstrap
    local exact = {}
    local states = { na = helpers.tmpdir(), nb = helpers.tmpdir(),
                     nc = helpers.tmpdir() .. "/state" }
    local nodes = { na = node(bs, "na", "a", sshd, states.na),
                    nb = node(bs, "nb", "b", sshd, states.nb) }
    helpers.eventually(function() return cluster.settled(nodes, 2) end, 40, 0.2)
    helpers.produce(bs, "text-lines", cluster.spelled_lines(0, 9999, exact, WORDS),
                    { timeout = 120 })
    helpers.eventually(function() return cluster.committed_total(bs) == 10000 end, 120, 0.5)

    nodes.nc = node(bs, "nc", "c", sshd, states.nc,
                    helpers.faultfs(states.nc, "enospc", 150 * 1024))
    local failed = nodes.nc:wait_event("bootstrap_failed", { fallback = "changelog" }, 60)
    assert.matches("No space left on device", failed.error)
    -- (log text: the message is the feature, what an operator or a user reads)
    nodes.nc:wait_log("standby replicas stopped: [^\n]*No space left on device", 30)
    -- the disk watch saw it coming (faultfs: statvfs of a 150 KiB file system, 4 KiB blocks)
    local low = nodes.nc:wait_event("disk_low", nil, 15)
    assert.is_true(low.size_bytes >= 140 * 1024 and low.size_bytes < 160 * 1024, low.size_bytes)
    assert.is_true(low.free_bytes < low.size_bytes * low.pct / 100, low.free_bytes)
    -- no partial fetch left behind (.bootstrap-S_P, *.part)
    local p = io.popen("find " .. states.nc .. " -name '.bootstrap-*' -o -name '*.part'")
    local left = p:read("*a")
    p:close()
    assert.equal("", left)
    helpers.produce(bs, "text-lines", cluster.spelled_lines(10000, 11999, exact, WORDS),
                    { timeout = 120 })
    helpers.eventually(function() return cluster.committed_total(bs) == 12000 end, 60, 0.5)
    for id, n in pairs(nodes) do assert(n:alive(), id .. " ended:\n" .. n:log()) end

    -- room again: the same state directory, the replicas built, equal to the actives'
    assert.equal(0, nodes.nc:stop())
    nodes.nc = node(bs, "nc", "c", sshd, states.nc)
    nodes.nc:wait_event("epoch", nil, 30)
    helpers.produce(bs, "text-lines", cluster.spelled_lines(12000, 12999, exact, WORDS),
                    { timeout = 120 })
    helpers.eventually(function() return cluster.committed_total(bs) == 13000 end, 60, 0.5)
    helpers.eventually(function()
      for _, t in ipairs(cluster.status_json(bs).tasks) do
        for _, pr in ipairs(t.progress or {}) do
          if pr.lag ~= 0 then return nil, "task " .. t.task .. " on " .. pr.node .. " behind" end
        end
      end
      return true
    end, 40, 0.5)
    -- each task nc holds, and the other node holding it now (active or caught-up standby)
    local held, peer = {}, {}
    for _, id in ipairs({ "na", "nb" }) do
      local e = cluster.now_of(nodes[id])
      for _, t in ipairs(e.running) do peer[t] = id end
      for _, t in ipairs(e.standby) do peer[t] = peer[t] or id end
    end
    for _, t in ipairs(cluster.now_of(nodes.nc).running) do held[#held + 1] = t end
    for _, t in ipairs(cluster.now_of(nodes.nc).standby) do held[#held + 1] = t end
    assert.is_true(#held > 0)
    for id, n in pairs(nodes) do assert.equal(0, n:stop(), id) end
    for _, t in ipairs(held) do
      local other = cluster.dump(states[assert(peer[t], t)], t)
      local mine, n = cluster.dump(states.nc, t)
      assert.is_true(n > 0, t)
      assert.same(other, mine, t)
    end
  end)
end)
