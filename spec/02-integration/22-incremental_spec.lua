-- Tasks change in place (runtime/engine/thread_tasks.c, crew.h): while a fourth node joins,
-- one leaves with SIGTERM and one is killed with SIGKILL, the tasks that did not move keep
-- processing without a pause beyond their usual one, their processors are not built
-- again, and the counts stay exact (the scenario: spec/fixtures/rebalance.lua).
local helpers = require "spec.helpers"
local rebalance = require "spec.fixtures.rebalance"

describe("incremental task changes", function()
  after_each(helpers.cleanup)

  it("keep unmoved tasks running through a join, a SIGTERM and a SIGKILL", function()
    local r = rebalance.run { rate = 600, seconds = 40 }
    for key, n in pairs(r.want) do assert.equal(n, r.latest[key], "count of " .. key) end
    local n, worst, worst_task = 0, -1, nil
    for task, u in pairs(r.unmoved) do
      n = n + 1
      assert.equal(1, u.inits, "init() of task " .. task .. " on " .. u.node)
      assert.is_true(u.normal > 0, "task " .. task .. " had outputs before the changes")
      assert.is_true(u.worst <= u.normal + 50, string.format(
        "task %s on %s paused %d ms during the %s (normally at most %d ms)", task, u.node,
        u.worst, tostring(u.during), u.normal))
      if u.worst - u.normal > worst then worst, worst_task = u.worst - u.normal, task end
    end
    -- with 12 tasks over 3, 4, 3 and 2 nodes, some of na's and nb's never moved
    assert.is_true(n >= 2, "unmoved tasks: " .. n)
    print(string.format("\n  %d unmoved task(s); the largest gap during a change exceeded its "
                        .. "usual one by %d ms (task %s: %d vs %d ms)", n, worst, worst_task,
                        r.unmoved[worst_task].worst, r.unmoved[worst_task].normal))
    for _, id in ipairs { "na", "nb" } do assert.equal(0, r.nodes[id]:stop()) end
  end)
end)
