-- Several `beck run --cluster 1` nodes of one app share its tasks through
-- the control topic (runtime/cluster/member.c), on a dev broker, each node its own
-- process: counts stay exact while a node joins, and nothing is lost when
-- one is killed with SIGKILL.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

-- lines keyed by bucket (counts exact), the key choosing the partition
local make_lines, committed_total = cluster.bucket_lines, cluster.committed_total
local latest, running, node = cluster.latest, cluster.running, cluster.start_node

describe("a cluster of nodes", function()
  after_each(helpers.cleanup)

  it("shares the tasks, takes in a new node, survives a SIGKILL, and counts exactly",
     function()
    local broker = helpers.start_broker { topics = { "text-lines:12" } }
    local bs = broker.bootstrap
    local exact = {}
    local a, b, c = node(bs, "na", "a"), node(bs, "nb", "b"), node(bs, "nc", "c")
    -- three nodes: 4 tasks each
    helpers.eventually(function()
      return running(a) == 4 and running(b) == 4 and running(c) == 4
    end, 60, 0.2)
    helpers.produce(bs, "text-lines", make_lines(1, 20000, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == 20000 end, 60, 0.3)

    -- a fourth node joins: 3 tasks each
    local d = node(bs, "nd", "a")
    helpers.eventually(function()
      return running(a) == 3 and running(b) == 3 and running(c) == 3 and running(d) == 3
    end, 30, 0.2)
    helpers.produce(bs, "text-lines", make_lines(20001, 40000, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == 40000 end, 60, 0.3)
    local kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, n in pairs(exact) do assert.equal(n, kv[w], "count of " .. w) end

    -- SIGKILL of one node: its tasks move to the others after the session
    -- timeout, and what it had not committed is processed again (counted once)
    local killed_at = tonumber(io.popen("date +%s%3N"):read("*l")) -- wall ms, as events' time
    d:kill()
    helpers.produce(bs, "text-lines", make_lines(40001, 50000, exact), { timeout = 60 })
    helpers.eventually(function()
      return running(a) + running(b) + running(c) == 12
    end, 40, 0.3)
    helpers.eventually(function() return committed_total(bs) == 50000 end, 60, 0.3)
    kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    -- what it had not committed is processed again, and counted once: the
    -- takeover dropped its writes after its last commit marker (store.h)
    for w, n in pairs(exact) do assert.equal(n, kv[w], "count of " .. w) end
    for _, n in ipairs { a, b, c } do assert.equal(0, n:stop()) end

    -- The events of (task, node, epoch, first and last record): on each task the nodes'
    -- spans of processing never overlap in time. A span starts at the "first_record" event
    -- and ends at the "last_record" event (committed) of the same task, or at the kill for
    -- the killed node.
    local spans = {}
    for id, n in pairs { na = a, nb = b, nc = c, nd = d } do
      local open = {}
      for _, e in ipairs(n:events()) do
        if e.kind == "first_record" then
          open[e.task] = { node = id, task = e.task, epoch = e.epoch, from = e.time }
        elseif e.kind == "last_record" and open[e.task] then
          open[e.task].to = e.time
          spans[#spans + 1] = open[e.task]
          open[e.task] = nil
        end
      end
      for _, sp in pairs(open) do
        assert.equal("nd", id, "span without an end on " .. id)
        sp.to = killed_at
        spans[#spans + 1] = sp
      end
    end
    -- every task that had input has a span (tasks change in place: one that never moved
    -- has one span from its first record to the end)
    local spanned = {}
    for _, sp in ipairs(spans) do spanned[sp.task] = true end
    for p, off in pairs(helpers.committed(bs, "text-lines", "wordcount")) do
      if off > 0 then assert.is_true(spanned["0_" .. p], "no span of task 0_" .. p) end
    end
    for i = 1, #spans do
      for j = i + 1, #spans do
        local x, y = spans[i], spans[j]
        if x.task == y.task and x.node ~= y.node then
          assert.is_true(x.to <= y.from or y.to <= x.from,
                         string.format("task %s on %s (epoch %s) and %s (epoch %s) at once",
                                       x.task, x.node, x.epoch, y.node, y.epoch))
        end
      end
    end
  end)
end)
