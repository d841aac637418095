-- A node that comes back after a move retired the generation its passthrough used to feed
-- (issue 38, first finding), on both brokers, under exactly-once: spec/fixtures/
-- stamped_count.lua's count runs with its own task count (generation 1, 3 tasks) on two
-- nodes. nb is frozen (SIGSTOP) past its session; meanwhile the count moves to 4 tasks
-- (generation 2) and generation 1 is retired. nb wakes: on Kafka its threads find
-- themselves fenced (they commit nothing more, so they do not follow the grown plan), the
-- node follows the move and rejoins as a new incarnation, and its threads renew their
-- producers before they take tasks again. na is killed: nb takes every task, the
-- passthrough's among them. Then both nodes start again on their state directories.
-- Records flow throughout.
-- A passthrough task must forward to generation 2: a record forwarded to generation 1's
-- topic, which nobody reads once it is retired, is lost while its input offset commits.
-- Checked from outside: every key counted 1..rounds (none missing; on Kafka, read
-- committed, none repeated), and generation 1's topic got no record after its retirement.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local gen = require "spec.fixtures.generations"

local APP = gen.APP
local KEYS = 2000
local SIGSTOP, SIGCONT = 19, 18 -- Linux

local function start(bs, id, rack, dir)
  return gen.start(bs, id, rack, { "--tasks", "0=3", "--processing-guarantee", "exactly_once" },
                   { state = dir })
end

local function committed(bs, total)
  helpers.eventually(function()
    local n = cluster.committed_total(bs, "stamp-in", APP)
    return n == total, string.format("%d of stamp-in's %d records committed", n, total)
  end, 90, 0.3)
end

-- The records ever written to generation 1's topic: its end offsets summed (the cleanup may
-- delete them, which moves the start offsets only).
local function g1_records(bs)
  local total = 0
  for _, se in pairs(helpers.offsets(bs, gen.GEN_TOPIC)) do total = total + se[2] end
  return total
end

local function retired(nodes)
  for _, n in pairs(nodes) do
    if n:last_event("retired", { subtopology = 0, generation = 1 }) then return true end
  end
  return false, gen.moves_state(nodes)
end

describe("a node back after its generation was retired", function()
  after_each(helpers.cleanup)

  it("forwards to the newest generation, never to the retired one", function()
    local broker = helpers.start_broker { topics = { "stamp-in:3", "stamp-out:3" } }
    local bs = broker.bootstrap
    local dirs = { na = helpers.tmpdir(), nb = helpers.tmpdir() }
    local nodes = { na = start(bs, "na", "a", dirs.na), nb = start(bs, "nb", "b", dirs.nb) }
    helpers.eventually(function()
      return (cluster.running(nodes.na) or 0) + (cluster.running(nodes.nb) or 0) == 6
    end, 60, 0.2)
    helpers.produce(bs, "stamp-in", gen.round(KEYS)) -- round 1: generation 1
    committed(bs, KEYS)

    -- nb frozen past its 2 s session: na takes its tasks (and fences it), and moves alone
    nodes.nb:signal(SIGSTOP)
    helpers.eventually(function()
      return (cluster.running(nodes.na) or 0) == 6
    end, 30, 0.2)
    gen.move(bs, 4)
    helpers.produce(bs, "stamp-in", gen.round(KEYS)) -- round 2: during the move
    -- generation 1 retired (every task of it drained, so every passthrough switched
    -- before: nothing writes there again), as the node that ran its tasks cleans them up
    helpers.eventually(function() return retired(nodes) end, 60, 0.3)
    committed(bs, 2 * KEYS)
    local g1_at_retirement = g1_records(bs)

    -- nb wakes, finds itself lost, follows the move and rejoins; the tasks are shared
    -- again, its passthrough tasks among them
    nodes.nb:signal(SIGCONT)
    helpers.eventually(function()
      return (cluster.running(nodes.nb) or 0) > 0 and nodes.nb:log():find("rejoining", 1, true)
    end, 60, 0.3)
    -- (the dev broker fences nothing: what nb's producer held when it froze is sent when it
    -- wakes, and may land in generation 1's topic; Kafka refuses it, nb being fenced)
    local g1_before = helpers.real_kafka() and g1_at_retirement or g1_records(bs)
    -- na dies: nb takes every task, the passthrough's too
    nodes.na:kill()
    helpers.eventually(function()
      return (cluster.running(nodes.nb) or 0) == 7 -- 3 passthrough + 4 of generation 2
    end, 60, 0.2)
    helpers.produce(bs, "stamp-in", gen.round(KEYS)) -- round 3
    committed(bs, 3 * KEYS)

    -- both nodes die and come back on their state directories while round 4 is written
    nodes.nb:kill()
    nodes = { na = start(bs, "na", "a", dirs.na), nb = start(bs, "nb", "b", dirs.nb) }
    helpers.produce(bs, "stamp-in", gen.round(KEYS)) -- round 4
    committed(bs, 4 * KEYS)

    local rounds = 4
    local bad, repeats
    helpers.eventually(function()
      local list = helpers.consume(bs, "stamp-out", { timeout = 30, committed = true })
      bad, repeats = gen.sequences(list, KEYS, rounds)
      return #bad == 0, #bad .. " key(s) not counted 1.." .. rounds .. ", e.g. " ..
                        table.concat(bad, " | ", 1, math.min(3, #bad))
    end, 60, 1)
    assert.equal(0, #bad, table.concat(bad, "\n"))
    if helpers.real_kafka() then
      assert.equal(0, repeats, "outputs repeated under exactly-once")
    end
    assert.equal(g1_before, g1_records(bs),
                 "records forwarded to the retired generation 1's topic\n" ..
                 gen.moves_state(nodes))
    for id, n in pairs(nodes) do
      assert.equal(0, n:stop(), id .. ": " .. n:last_words())
    end
  end)
end)
