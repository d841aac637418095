-- Exactly-once on one node (docs/state.md#exactly-once): spec/fixtures/stamped_count.lua
-- under processing_guarantee=exactly_once counts keyed input that an outside producer writes,
-- is killed with SIGKILL in mid-stream and started again (same node id: its producer's next
-- start aborts what the killed one left open). An outside reader then reads the output.
-- On real Kafka, as a read_committed reader: each key's outputs are exactly 1, 2, 3, ...,
-- nothing repeated. On the dev broker, which enforces no transaction, the node warns that
-- exactly-once cannot be verified and the counts are at-least-once's: none lost, none over.
-- And a record that raises under on_error=fail: its task is parked, the open transaction is
-- aborted, and `beck skip` moves it past the record (Kafka only).
-- The cluster cases (kills at random, a node frozen past its session and fenced) are in
-- spec/04-long/04-exactly_once_spec.lua.
local helpers = require "spec.helpers"
local chaos = require "spec.fixtures.chaos"

local TOPOLOGY = "spec/fixtures/stamped_count.lua"

local function values_of(list)
  local out = {}
  for i, r in ipairs(list) do out[i] = r.value end
  return out
end

local function start(bs, dir)
  return helpers.start_node(TOPOLOGY, { "-b", bs, "--node-id", "solo", "--state-dir", dir,
                                        "--processing-guarantee", "exactly_once",
                                        "-X", "fetch.wait.max.ms=10" }, { name = "solo" })
end

describe("exactly-once on one node", function()
  after_each(helpers.cleanup)

  it("refuses an unknown guarantee, naming the setting", function()
    local st, _, err = helpers.run({ helpers.beck_bin(), "run", TOPOLOGY,
                                     "--processing-guarantee", "exactly-twice" },
                                   { timeout = 10 })
    assert.equal(2, st)
    assert.matches("processing_guarantee", err)
  end)

  it("a record that raises under on_error=fail: nothing of the open transaction is seen, "
     .. "and beck skip goes on past it",
     function()
    if not helpers.real_kafka() then
      pending("the dev broker does not hide what a transaction aborted")
      return
    end
    helpers.with_timeout(120, function()
      local broker = helpers.start_broker {}
      local bs = broker.bootstrap
      assert.is_true(broker:create_topic("boom-in", 1))
      local records = {}
      for i = 0, 9 do records[#records + 1] = { key = "k" .. i, value = "fine " .. i } end
      records[4].value = "a boom here"
      helpers.produce(bs, "boom-in", records)
      local args = { "-b", bs, "--node-id", "solo", "--processing-guarantee", "exactly_once" }
      local node = helpers.start_node("spec/fixtures/boom.lua", args)
      node:wait_event("redo", function(e)
        return e.error:find("parked on a record that failed: the open transaction is aborted",
                            1, true) ~= nil
      end, 60)
      assert.is_table(node:last_event("task", { to = "parked" }), node:events_tail())
      -- outputs and offsets commit together: what is seen is exactly what was committed, a
      -- prefix of what came before the bad record (here nothing: all ten came in one batch)
      helpers.sleep(2)
      assert.is_true(node:alive(), node:log())
      local seen = values_of(helpers.consume(bs, "boom-out", { committed = true }))
      local committed = helpers.committed(bs, "boom-in", "boom")[0] or 0
      assert.equal(#seen, committed)
      assert.is_true(#seen <= 3)
      for i, v in ipairs(seen) do assert.equal("fine " .. (i - 1) .. "!", v) end
      -- beck skip lists it: the task goes on from its last commit, past that record only
      local st, _, err = helpers.run({ helpers.beck_bin(), "skip", "-b", bs, "--app", "boom",
                                       "--topic", "boom-in", "--partition", "0", "--offset", "3" },
                                     { timeout = 60 })
      assert.equal(0, st, err)
      helpers.eventually(function()
        return (helpers.committed(bs, "boom-in", "boom")[0] or 0) == 10
      end, 60, 0.2)
      assert.equal(0, node:stop())
      assert.is_table(node:last_event("skipped", { topic = "boom-in", partition = 0, offset = 3 }),
                      node:events_tail())
      local want = {}
      for i = 0, 9 do
        if i ~= 3 then want[#want + 1] = "fine " .. i .. "!" end
      end
      assert.same(want, values_of(helpers.consume(bs, "boom-out", { committed = true })))
    end)
  end)

  it("counts exactly across a SIGKILL: read_committed sees each count once", function()
    helpers.with_timeout(240, function()
      local broker = helpers.start_broker { topics = { "stamp-in:" .. chaos.PARTITIONS,
                                                       "stamp-out:" .. chaos.PARTITIONS } }
      local c = { bs = broker.bootstrap }
      local seconds, rate = 16, 250
      local dir = helpers.tmpdir()
      local node = start(c.bs, dir)
      node:wait_running(60)
      if helpers.real_kafka() then
        assert.not_matches("cannot be verified", node:log())
      else
        assert.matches("exactly_once on a dev broker: .* cannot be verified here", node:log())
      end
      local feeder = chaos.feed(c, rate, seconds)
      helpers.sleep(6)
      node:kill()
      helpers.sleep(1)
      node = start(c.bs, dir)
      node:wait_running(60)
      assert.equal(0, feeder:wait(seconds + 60), "the steady producer failed: " .. feeder:log())
      local r = chaos.oracle(c, rate * seconds, helpers.real_kafka())
      local line = string.format("exactly-once, one node, %s: sent=%d outputs=%d lost=%d " ..
                                 "over=%d extra=%d order=%d dup=%d inexact=%d",
                                 helpers.backend(), r.sent, r.outputs, r.lost, r.over, r.extra,
                                 r.order, r.dup, r.inexact)
      print("\n  " .. line)
      local bad = line .. "\n" .. table.concat(r.bad, "\n", 1, math.min(#r.bad, 20))
      assert(r.lost == 0 and r.over == 0 and r.extra == 0 and r.order == 0, bad)
      if helpers.real_kafka() then
        assert(r.dup == 0 and r.inexact == 0, bad)
      end
      assert.equal(0, node:stop())
    end)
  end)
end)
