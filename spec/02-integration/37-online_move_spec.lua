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
local gen = require "spec.fixtures.generations"
local sshd_fixture = require "spec.fixtures.sshd"

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

describe("a subtopology moved to another task count while it runs", function()
  after_each(helpers.cleanup)

  it("counts every key exactly, in order, through two moves", function()
    gen.two_moves { input = 3, tasks0 = 10, each = 5, first = 8, keys = KEYS, start = start,
                    states = states, sshd = sshd_fixture.start, min_builds = 11, last = 3,
                    running = 8,
                    emptied = { "stamped-counts-changelog-g1", "stamped-counts-changelog-g2" } }
  end)
end)
