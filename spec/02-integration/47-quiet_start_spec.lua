-- A healthy app logs no warning (issue 39: every warning a fresh, healthy start prints is a
-- defect). Three cluster nodes with standbys and cold bootstrap over SSH start on fresh state
-- directories, count a round of input, move their count to another task count online
-- (`beck repartition`), count another round and stop: no node logs a WARN or ERROR line.
-- On the dev broker the only warnings allowed are the ones that say what it cannot do.
local helpers = require "spec.helpers"
local gen = require "spec.fixtures.generations"
local sshd_fixture = require "spec.fixtures.sshd"
local cluster = require "spec.fixtures.cluster"

local KEYS = 600

-- what the dev broker's nodes say because it is one (docs/dev-broker.md)
local DEV_ONLY = {
  "cleanup: topic [^ ]+ of a retired generation keeps its records: the dev broker",
}

local function noise(log)
  local lines = {}
  for line in log:gmatch("[^\n]+") do
    if line:match("^%S+ WARN ") or line:match("^%S+ ERROR ") then
      local allowed = false
      for _, p in ipairs(helpers.real_kafka() and {} or DEV_ONLY) do
        allowed = allowed or line:match(p) ~= nil
      end
      if not allowed then lines[#lines + 1] = line end
    end
  end
  return lines
end

describe("a healthy cluster", function()
  after_each(helpers.cleanup)

  it("starts, counts, repartitions and stops without one warning", function()
    local sshd = sshd_fixture.start()
    local broker = helpers.start_broker { brokers = 3, racks = "a,b,c",
                                          topics = { "stamp-in:3", "stamp-out:3" } }
    local bs = broker.bootstrap
    local extra = { "--num-standby-replicas", "1", "--tasks", "0=4",
                    "--ssh-key", sshd.key, "--ssh-known-hosts", sshd.known_hosts,
                    "--ssh-user", sshd.user, "--ssh-host", "127.0.0.1",
                    "--ssh-port", tostring(sshd.port) }
    local nodes = {}
    for i, rack in ipairs { "a", "b", "c" } do
      nodes["n" .. i] = gen.start(bs, "n" .. i, rack, extra)
    end
    helpers.eventually(function()
      local n = 0
      for _, node in pairs(nodes) do n = n + (cluster.running(node) or 0) end
      return n == 8 -- the passthrough's 4 and the count's 4
    end, 90, 0.3)
    helpers.produce(bs, "stamp-in", gen.round(KEYS))
    gen.move(bs, 6)
    helpers.eventually(function()
      for _, node in pairs(nodes) do
        if node:last_event("retired", { subtopology = 0, generation = 1 }) then return true end
      end
      return false, gen.moves_state(nodes)
    end, 120, 0.5)
    helpers.produce(bs, "stamp-in", gen.round(KEYS))
    local bad
    helpers.eventually(function()
      local list = helpers.consume(bs, "stamp-out", { timeout = 30 })
      bad = gen.sequences(list, KEYS, 2)
      return #bad == 0, #bad .. " key(s) not counted 1..2"
    end, 90, 1)
    -- all at once (one by one, the last would take the others' tasks over without their
    -- drained checkpoints, which it rightly warns of)
    for _, node in pairs(nodes) do node:signal(15) end
    for id, node in pairs(nodes) do
      assert.equal(0, node:wait(60), id .. ": " .. node:last_words())
    end
    local all = {}
    for id, node in pairs(nodes) do
      for _, l in ipairs(noise(node:log())) do all[#all + 1] = id .. ": " .. l end
    end
    assert.equal("", table.concat(all, "\n"))
  end)
end)
