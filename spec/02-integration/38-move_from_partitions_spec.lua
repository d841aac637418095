-- A subtopology that reads its input by input partition (generation 0: no `tasks` setting)
-- moved to task counts of its own while records flow (docs/repartitioning.md, Moving from
-- generation 0), on both brokers: two nodes, subtopology 0 of spec/fixtures/stamped_count.lua
-- over a 4-partition input (4 tasks), moved to 6 and then to 3. At the first move each task
-- of generation 0 stops at the offsets it committed and drains (a checkpoint of its state);
-- the passthrough the move adds reads the input on from those offsets and forwards it by key
-- group to generation 1's topic; each task of generation 1 is built from every drained
-- checkpoint (any of them may hold keys of its groups), cut to its groups. The second move
-- is the one between generations (barriers from the passthrough).
-- Checked from outside: every key's counts are 1, 2, 3, ... with none missing or repeated
-- across both moves, the records after a move are counted by the task of the new
-- generation that owns the key's group, no build replayed a changelog record, and both
-- nodes started again on empty disks count on.
local helpers = require "spec.helpers"
local gen = require "spec.fixtures.generations"
local sshd_fixture = require "spec.fixtures.sshd"

local KEYS = 1500

local states = {}

local function start(bs, id, rack, sshd)
  states[id] = helpers.tmpdir()
  -- (a standby of a later generation asked of an active not built yet hears nothing back:
  -- asked again after bootstrap_timeout_ms)
  return gen.start(bs, id, rack, { "--num-standby-replicas", "1",
                                   "--bootstrap-timeout-ms", "4000",
                                   "--ssh-key", sshd.key,
                                   "--ssh-known-hosts", sshd.known_hosts, "--ssh-user", sshd.user,
                                   "--ssh-host", "127.0.0.1", "--ssh-port", tostring(sshd.port) },
                   { state = states[id] })
end

describe("a subtopology read by input partition moved to task counts of its own", function()
  after_each(helpers.cleanup)

  it("counts every key exactly, in order, through two moves", function()
    gen.two_moves { input = 4, tasks0 = 4, first = 6, keys = KEYS, start = start,
                    states = states, sshd = sshd_fixture.start, round1_task = "^0_[0-3]$",
                    min_builds = 9, last = 2, running = 9,
                    emptied = { "stamped-counts-changelog", "stamped-counts-changelog-g1" } }
  end)
end)
