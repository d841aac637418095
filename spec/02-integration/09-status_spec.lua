-- `beck status` (runtime/cmd/cmd_status.c): an observer of an app's control topic prints its
-- cluster. Three `beck run --cluster 1` nodes of wordcount on a dev broker, each its own
-- process; status (text and --json) must show them with their racks, one epoch, a leader and
-- every task active on exactly one node, then a node that left and its tasks moved. Values
-- are checked against what the nodes themselves log, not only against status's own output.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local cjson = require "cjson.safe"

local WORDCOUNT = "scripts/examples/wordcount.lua"
local APP = "wordcount"
local TASKS = 12

-- Short membership intervals, so that a node that leaves is seen gone within seconds; status
-- takes the session timeout from the heartbeats.
local function cluster_args()
  return { "--heartbeat-interval-ms", "200", "--session-timeout-ms", "2000" }
end

local function node(bs, id, rack)
  local n = cluster.start_node(bs, id, rack, cluster_args())
  n.id, n.rack = id, rack
  return n
end

-- What the node's own log says it runs last ("epoch N: running M task(s)").
local running = cluster.running

local function status(bs, extra)
  local argv = { helpers.beck_bin(), "status", "-b", bs, "--app", APP }
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  return helpers.run(argv, { name = "status", timeout = 30 })
end

-- `beck status --json`, decoded; fails the spec on a non-zero exit or bad JSON.
local function status_json(bs)
  local st, out, err = status(bs, { "--json" })
  assert(st == 0, "beck status --json exited with " .. st .. ": " .. err)
  local lines = select(2, out:gsub("\n", "\n"))
  assert(lines == 1, "one JSON line expected, got:\n" .. out)
  local s, jerr = cjson.decode(out)
  assert(type(s) == "table", "not JSON (" .. tostring(jerr) .. "):\n" .. out)
  return s
end

local function by_id(s)
  local nodes = {}
  for _, n in ipairs(s.nodes) do nodes[n.id] = n end
  return nodes
end

-- Settled on exactly `ids`: one stable epoch that every listed node has applied, no
-- handoff, every task active on a live node among them, `per_node` tasks each.
local function settled(s, ids, per_node)
  local nodes, alive = by_id(s), 0
  for _, n in ipairs(s.nodes) do alive = alive + (n.state == "alive" and 1 or 0) end
  if alive ~= #ids then return nil, alive .. " alive" end
  if not s.stable or s.epoch < 1 then return nil, "not stable at epoch " .. s.epoch end
  for _, id in ipairs(ids) do
    local n = nodes[id]
    if not n or n.state ~= "alive" then return nil, id .. " is not alive" end
    if n.epoch ~= s.epoch then return nil, id .. " has applied epoch " .. n.epoch end
    if n.active ~= per_node then return nil, id .. " has " .. n.active .. " tasks" end
  end
  if #s.tasks ~= TASKS then return nil, #s.tasks .. " tasks" end
  for _, t in ipairs(s.tasks) do
    if t.handoff then return nil, "task " .. t.task .. " is being handed off" end
  end
  return true
end

describe("beck status", function()
  after_each(helpers.cleanup)

  it("fails with a clear message and exit 1 when the app has no control topic", function()
    local broker = helpers.start_broker { topics = { "text-lines:12" } }
    for _, extra in ipairs { {}, { "--json" } } do
      local st, out, err = status(broker.bootstrap, extra)
      assert.equal(1, st)
      assert.equal("", out)
      assert.matches("control topic wordcount%-control does not exist", err)
    end
    -- bad arguments are 2, with the reason
    local st, _, err = helpers.run({ helpers.beck_bin(), "status", "-b", broker.bootstrap },
                                   { name = "status" })
    assert.equal(2, st)
    assert.matches("%-%-app ID is needed", err)
    st, _, err = helpers.run({ helpers.beck_bin(), "status", "--app", APP, "--bogus" },
                             { name = "status" })
    assert.equal(2, st)
    assert.matches("unknown option %-%-bogus", err)
  end)

  it("shows the nodes, the epoch, the leader and every task, then a node that left",
     function()
    local broker = helpers.start_broker { topics = { "text-lines:12" } }
    local bs = broker.bootstrap
    local a, b, c = node(bs, "na", "a"), node(bs, "nb", "b"), node(bs, "nc", "c")
    local nodes = { a, b, c }

    -- three nodes: 4 tasks each, as status and the nodes' own logs say
    local s = helpers.eventually(function()
      local s = status_json(bs)
      local ok, why = settled(s, { "na", "nb", "nc" }, 4)
      if not ok then return nil, why end
      return s
    end, 60, 0.3) -- (under make test SAN=1's load, settling took over 40 s)
    helpers.eventually(function()
      return running(a) == 4 and running(b) == 4 and running(c) == 4
    end, 20, 0.2)

    assert.equal(APP, s.app)
    assert.equal("wordcount-control", s.control_topic)
    assert.is_true(s.records > 0)
    assert.is_true(s.session_timeout_ms > 0)
    assert.equal(3, #s.nodes)
    local ids = by_id(s)
    local leaders = 0
    for _, n in ipairs(nodes) do
      local v = ids[n.id]
      assert.equal(n.rack, v.rack)
      assert.equal("alive", v.state)
      assert.equal(1, v.threads)
      assert.is_true(v.incarnation > 0)
      assert.is_true(v.heartbeat_ms_ago >= 0 and v.heartbeat_ms_ago < s.session_timeout_ms,
                     "heartbeat of " .. n.id .. " " .. v.heartbeat_ms_ago .. " ms ago")
      if v.leader then leaders = leaders + 1 end
    end
    assert.equal(1, leaders)
    assert.is_truthy(ids[s.leader] and ids[s.leader].leader, "leader " .. tostring(s.leader))
    -- the leader is the live node that joined first
    for _, v in ipairs(s.nodes) do
      assert.is_true(ids[s.leader].join_offset <= v.join_offset)
    end

    -- every task: exactly one active, among the three, counted as the nodes' totals say
    local count = { na = 0, nb = 0, nc = 0 }
    for i, t in ipairs(s.tasks) do
      assert.equal(i - 1, t.task)
      assert.is_truthy(count[t.active], "task " .. t.task .. " active on " .. tostring(t.active))
      assert.equal(t.active, t.holder)
      assert.same({}, t.standby)
      count[t.active] = count[t.active] + 1
      for _, p in ipairs(t.progress) do
        assert.is_truthy(count[p.node], "progress of task " .. t.task .. " from " .. p.node)
        assert.is_true(p.applied_ms_ago >= 0 and p.lag >= 0)
      end
    end
    assert.same({ na = 4, nb = 4, nc = 4 }, count)

    -- the text form says the same, with names from the topology
    local st, out, err = status(bs, { WORDCOUNT })
    assert(st == 0, err)
    assert.matches("app wordcount: epoch %d+, leader " .. s.leader .. ", stable\n", out)
    assert.matches("nodes: 3 alive, 0 ended\n", out)
    for _, n in ipairs(nodes) do
      assert.matches("\n" .. n.id .. "[ *]+" .. n.rack .. " +%S+ +1 +alive ", out)
    end
    local tasks = 0
    for name, active in out:gmatch("\n(0_%d+) +(n[abc]) ") do
      tasks = tasks + 1
      assert.equal(s.tasks[tonumber(name:match("_(%d+)")) + 1].active, active)
    end
    assert.equal(TASKS, tasks)

    -- progress (when the nodes report it): a task fed records reports a new offset, and its
    -- "applied ... ago" then grows while nothing more arrives
    if #s.tasks[4].progress > 0 then
      local recs = {}
      for i = 1, 30 do recs[i] = { key = "k" .. i, value = "w" .. i, partition = 3 } end
      helpers.produce(bs, "text-lines", recs)
      local t3 = helpers.eventually(function()
        local t = status_json(bs).tasks[4]
        for _, p in ipairs(t.progress) do
          if p.node == t.active and p.offset >= 30 then return p end
        end
        return nil, cjson.encode(t.progress)
      end, 20, 0.3)
      helpers.sleep(1.5)
      local later
      for _, p in ipairs(status_json(bs).tasks[4].progress) do
        if p.node == t3.node then later = p end
      end
      assert.equal(t3.offset, later.offset)
      assert.is_true(later.applied_ms_ago >= t3.applied_ms_ago + 1000,
                     later.applied_ms_ago .. " ms after " .. t3.applied_ms_ago)
    else
      helpers.trace("the nodes report no progress: progress checks skipped")
    end

    -- SIGTERM: nb leaves, its tasks move to the other two (6 each) in a later epoch
    assert.equal(0, b:stop())
    local s2 = helpers.eventually(function()
      local s2 = status_json(bs)
      local ok, why = settled(s2, { "na", "nc" }, 6)
      if not ok then return nil, why end
      return s2
    end, 30, 0.3)
    assert.is_true(s2.epoch > s.epoch)
    assert.equal("left", by_id(s2).nb.state)
    assert.equal(0, by_id(s2).nb.active)
    for _, t in ipairs(s2.tasks) do
      assert.is_true(t.active == "na" or t.active == "nc", "task " .. t.task .. " on " ..
                     tostring(t.active))
    end
    helpers.eventually(function() return running(a) == 6 and running(c) == 6 end, 20, 0.2)
    st, out, err = status(bs)
    assert(st == 0, err)
    assert.matches("nodes: 2 alive, 1 ended\n", out)
    assert.matches("\nnb +b +%S+ +1 +left ", out)
    for _, n in ipairs { a, c } do assert.equal(0, n:stop()) end
  end)
end)
