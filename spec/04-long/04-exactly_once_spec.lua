-- Exactly-once (issue 14, docs/state.md#exactly-once) on real Kafka: three nodes of
-- spec/fixtures/stamped_count.lua in racks a/b/c with one standby per task count keyed input
-- under processing_guarantee=exactly_once while an outside producer writes. The count is
-- forwarded for every record, straight from the store (no cache in between), so each key's
-- outputs must be exactly 1, 2, 3, ...; an outside read_committed reader checks them
-- (spec/fixtures/chaos.lua's oracle: `inexact` and `dup` must be 0 as well as lost, over,
-- extra and order).
--   1. Nodes are killed with SIGKILL at random at least 10 times, each restarted 2-4 s later.
--   2. A node frozen (SIGSTOP) past its session: its tasks move, the others fence it; when it
--      wakes (SIGCONT) its producer is refused, it logs that it was fenced and commits
--      nothing, finds itself lost and rejoins; the output is exact.
--   3. The same kills under at-least-once, for comparison: its repeats are printed.
-- Real Kafka only: the dev broker accepts transactions but enforces none of this.
local helpers = require "spec.helpers"
local chaos = require "spec.fixtures.chaos"
local cluster = require "spec.fixtures.cluster"

local SIGSTOP, SIGCONT = 19, 18 -- Linux

local function check(r)
  print("\n  " .. r.line)
  assert(r.lost == 0 and r.over == 0 and r.extra == 0 and r.order == 0 and r.dup == 0 and
         r.inexact == 0, r.line .. "\n" .. table.concat(r.bad, "\n", 1, math.min(#r.bad, 20)))
end

describe("exactly-once", function()
  after_each(helpers.cleanup)

  if not helpers.real_kafka() then
    it("runs on real Kafka", function()
      pending("the dev broker accepts transactions but neither aborts nor fences them")
    end)
    return
  end

  it("emits each key's counts exactly once, in order, while nodes are killed", function()
    helpers.with_timeout(420, function()
      local r = chaos.run { seconds = 45, exactly_once = true, only = "kill", min_kills = 10 }
      check(r)
      for _, n in pairs(r.nodes) do assert.equal(0, n:stop()) end
    end)
  end)

  it("fences a node frozen past its session: it commits nothing more, then rejoins",
     function()
    helpers.with_timeout(300, function()
      local seconds, rate = 30, 200
      local c = chaos.up { exactly_once = true }
      local feeder = chaos.feed(c, rate, seconds)
      helpers.sleep(8)
      local z = c.nodes.n2
      local mark = #z:events()
      z:signal(SIGSTOP)
      -- its session is 2 s: the others take it for dead, fence it and take its tasks over
      helpers.eventually(function()
        return c.nodes.n1:last_event("fenced_node", { node = "n2" }) or
               c.nodes.n3:last_event("fenced_node", { node = "n2" }), c.nodes.n1:events_tail()
      end, 30, 0.2)
      helpers.sleep(3)
      z:signal(SIGCONT)
      -- it commits nothing more: its threads see its membership lease ran out and release
      -- its tasks without a commit, or (if one tried first) find their producer fenced
      helpers.eventually(function()
        for i, e in ipairs(z:events()) do
          if i > mark and (e.kind == "producer_fenced" or e.kind == "unleased") then
            return true
          end
        end
        return false, z:events_tail()
      end, 30, 0.2)
      assert.equal(0, feeder:wait(seconds + 60), "the steady producer failed")
      local r = chaos.oracle(c, rate * seconds, true)
      r.line = string.format("zombie: sent=%d outputs=%d lost=%d over=%d extra=%d order=%d " ..
                             "dup=%d inexact=%d", r.sent, r.outputs, r.lost, r.over, r.extra,
                             r.order, r.dup, r.inexact)
      check(r)
      -- it rejoined: every node holds tasks again
      helpers.eventually(function() return cluster.settled(c.nodes, 2) end, 60, 0.2)
      for _, n in pairs(c.nodes) do assert.equal(0, n:stop()) end
    end)
  end)

  it("at-least-once under the same kills, for comparison (its repeats are allowed)", function()
    helpers.with_timeout(420, function()
      local r = chaos.run { seconds = 45, only = "kill", min_kills = 10 }
      print("\n  " .. r.line)
      assert(r.lost == 0 and r.over == 0 and r.extra == 0 and r.order == 0,
             r.line .. "\n" .. table.concat(r.bad, "\n", 1, math.min(#r.bad, 20)))
      for _, n in pairs(r.nodes) do assert.equal(0, n:stop()) end
    end)
  end)
end)
