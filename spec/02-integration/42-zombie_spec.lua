-- A node frozen past its session while it holds tasks, under at-least-once (issue 38, second
-- finding), on both brokers: spec/fixtures/chaos.lua's three nodes count keyed input with one
-- standby per task while an outside producer writes at an even pace, and one node after
-- another is frozen (SIGSTOP) for twice the session, so that the others take its tasks and
-- count on, and then woken (SIGCONT). A woken node must not commit what it did before the
-- freeze over the new owner's work: no release commit, no offsets, no checkpoint that claims
-- changelog records it never applied. Its state directories are reused when it gets the tasks
-- back, as standbys or actives. Checked from outside: no count lost and none over (repeats
-- are at-least-once's, and counted apart).
local helpers = require "spec.helpers"
local chaos = require "spec.fixtures.chaos"
local cluster = require "spec.fixtures.cluster"

local SIGSTOP, SIGCONT = 19, 18 -- Linux
local SESSION_MS = 2000
local RATE, SECONDS, KEYS = 1000, 30, 1000 -- keys a partition

-- The node with the most active tasks now, by its log's latest epoch line.
local function busiest(c)
  local best, most = nil, -1
  for _, id in ipairs(c.ids) do
    local n = #cluster.now_of(c.nodes[id]).running
    if n > most then best, most = id, n end
  end
  return best
end

describe("a node frozen past its session under at-least-once", function()
  after_each(helpers.cleanup)

  it("commits nothing when it wakes: no count lost, none over", function()
    helpers.with_timeout(240, function()
      local c = chaos.up {}
      local feeder = chaos.feed(c, RATE, SECONDS, false, KEYS)
      local frozen = 0
      local t0 = helpers.now()
      while helpers.now() - t0 < SECONDS - 6 do
        helpers.sleep(2)
        local id = busiest(c)
        c.nodes[id]:signal(SIGSTOP)
        helpers.sleep(2 * SESSION_MS / 1000)
        c.nodes[id]:signal(SIGCONT)
        frozen = frozen + 1
      end
      assert.equal(0, feeder:wait(SECONDS + 60), "the steady producer failed: " .. feeder:log())
      local r = chaos.oracle(c, RATE * SECONDS, false, KEYS)
      local line = string.format("frozen=%d sent=%d outputs=%d lost=%d over=%d dup=%d", frozen,
                                 r.sent, r.outputs, r.lost, r.over, r.dup)
      helpers.trace("%s", line)
      local why = line .. "\n" .. table.concat(r.bad, "\n", 1, math.min(20, #r.bad))
      assert.is_true(frozen >= 4, why)
      assert.equal(0, r.lost, why)
      assert.equal(0, r.over, why)
      assert.equal(0, r.extra, why)
      -- each woken node found itself lost, and committed nothing for the tasks it held
      local lost = 0
      for _, id in ipairs(c.ids) do
        local log = c.nodes[id]:log()
        for _ in log:gmatch("lost %(own heartbeats not seen back in time%)") do
          lost = lost + 1
        end
      end
      assert.is_true(lost >= 1, "no node found itself lost\n" .. why)

      -- every replica holds the truth: each node's copy of each task it runs or stands by
      -- for (a woken node's directories among them), once the standbys caught up
      helpers.sleep(3)
      local held = {}
      for _, id in ipairs(c.ids) do
        local e = cluster.now_of(c.nodes[id])
        held[id] = {}
        for _, t in ipairs(e.running) do held[id][#held[id] + 1] = t end
        for _, t in ipairs(e.standby) do held[id][#held[id] + 1] = t end
      end
      for _, id in ipairs(c.ids) do c.nodes[id]:signal(helpers.SIG.TERM) end
      for id, n in pairs(c.nodes) do
        assert.equal(0, n:wait(60), id .. ": " .. n:last_words())
      end
      local want, wrong, copies = chaos.sent_counts(RATE * SECONDS, KEYS), {}, 0
      for _, id in ipairs(c.ids) do
        for _, task in ipairs(held[id]) do
          local kv = cluster.dump(c.dirs[id], task, "stamped", "counts")
          copies = copies + 1
          for k, v in pairs(kv) do
            if tonumber(v) ~= want[k] and #wrong < 20 then
              wrong[#wrong + 1] = string.format("%s's copy of %s: %s = %s, %d sent", id, task,
                                                k, v, want[k] or 0)
            end
          end
        end
      end
      assert.is_true(copies >= 2 * chaos.PARTITIONS, copies .. " copies of the tasks")
      assert.equal(0, #wrong, table.concat(wrong, "\n"))
    end)
  end)
end)
