-- scripts/bench/rebalance.lua: run by scripts/bench/rebalance through `beck test` (the
-- spec helpers start the broker and the nodes); writes its figures to $BENCH_OUT.
local rebalance = require "spec.fixtures.rebalance"
local helpers = require "spec.helpers"

describe("rebalance bench", function()
  after_each(helpers.cleanup)

  it("measures the pauses of a join", function()
    local r = rebalance.run { rate = tonumber(os.getenv("BENCH_RATE") or "1200"),
                              seconds = tonumber(os.getenv("BENCH_SECONDS") or "60") }
    for key, n in pairs(r.want) do assert.equal(n, r.latest[key], "count of " .. key) end
    local pause, gap, normal, unmoved, moved, nmoved, inits = 0, 0, 0, 0, 0, 0, 0
    for task, u in pairs(r.unmoved) do
      io.stderr:write(string.format("  task %s on %s: largest gap %d ms before the changes " ..
                                    "(%d ms into the window), %d ms during the join, %d ms " ..
                                    "during any change (%s, ending at %s.%03d UTC)\n", task, u.node, u.normal,
                                    u.normal_at or -1, u.join, u.worst, tostring(u.during),
                                    os.date("!%H:%M:%S", math.floor((u.worst_at or 0) / 1000)),
                                    (u.worst_at or 0) % 1000))
      unmoved = unmoved + 1
      pause = math.max(pause, u.join - u.normal)
      gap = math.max(gap, u.join)
      normal = math.max(normal, u.normal)
      inits = math.max(inits, u.inits)
    end
    for _, ms in pairs(r.moved_join) do
      nmoved = nmoved + 1
      moved = math.max(moved, ms)
    end
    local f = assert(io.open(assert(os.getenv("BENCH_OUT"), "BENCH_OUT"), "w"))
    f:write(string.format("rebalance.unmoved_tasks %d\n", unmoved))
    f:write(string.format("rebalance.unmoved_inits_max %d\n", inits))
    f:write(string.format("rebalance.unmoved_normal_gap_ms %d\n", normal))
    f:write(string.format("rebalance.unmoved_join_gap_ms %d\n", gap))
    f:write(string.format("rebalance.unmoved_pause_ms %d\n", math.max(0, pause)))
    f:write(string.format("rebalance.moved_tasks %d\n", nmoved))
    f:write(string.format("rebalance.moved_pause_ms %d\n", moved))
    f:close()
    for _, id in ipairs { "na", "nb" } do r.nodes[id]:stop() end
  end)
end)
