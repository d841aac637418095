-- Membership (issue 6) across processes, on a dev broker. Each member is
-- `build/bench/settle member`: ONE runtime/cluster/member.c (its own consumer and producer of the
-- app's control topic) inside a simulated node that starts a task as soon as its view says it
-- may and stops and releases at once what it must give up, printing its views and every task
-- start and stop as JSON lines with wall-clock times. docs/cluster.md has the rules checked
-- here: one epoch and one leader, balanced tasks, standbys in another rack, handoff only after
-- a release, takeover after a kill -9 within the session timeout plus a heartbeat, a leave
-- much faster than that, a paused member that stops its tasks when it runs again and rejoins,
-- and never one task on two nodes at once.
local helpers = require "spec.helpers"
local cjson = require "cjson.safe"
local ffi = require "ffi"

local BIN = "build/bench/settle"
local HB, SESSION, TASKS = 200, 2000, 12
local SIGSTOP, SIGCONT = 19, 18 -- Linux

helpers.cdef("int clock_gettime(int clk, void *ts);")
local tsbuf = ffi.new("bk_spec_timespec_t") -- declared by spec.helpers
-- Wall-clock ms (CLOCK_REALTIME), as the members print.
local function wall_ms()
  ffi.C.clock_gettime(0, tsbuf)
  return tonumber(tsbuf.tv_sec) * 1000 + math.floor(tonumber(tsbuf.tv_nsec) / 1e6)
end

-- The dev broker answers an empty fetch only after the consumer's whole fetch.wait.max.ms
-- (MEASURED.md); a real broker answers as soon as a record arrives. The members' default (100
-- ms, for 100 members on one dev broker) would add up to that much to every hop here, so
-- these three or four members wait 20 ms.
local function start_member(broker, app, node, rack, extra)
  local argv = { BIN, "member", "-b", broker.bootstrap, "--app", app, "--node", node,
                 "--rack", rack, "--tasks", TASKS, "--threads", 1, "--standbys", 1,
                 "--heartbeat-ms", HB, "--session-ms", SESSION, "-X", "fetch.wait.max.ms=20" }
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  local p = helpers.spawn(argv, { name = node })
  p.node, p.rack = node, rack
  return p
end

-- Everything a member printed so far (a line still being written is skipped).
local function events(p)
  local list = {}
  for line in p:stdout():gmatch("[^\n]+") do
    local e = cjson.decode(line)
    if type(e) == "table" then list[#list + 1] = e end
  end
  return list
end

local function last_view(p)
  local ev = events(p)
  for i = #ev, 1, -1 do
    if ev[i].ev == "view" then return ev[i] end
  end
end

-- Settled: every member's latest view is of one epoch that covers exactly these members,
-- with one leader, nothing waiting or to release, and every task running on exactly one of
-- them. Returns the epoch, the views by node and the node running each task; or nil, why.
local function converged(members)
  local epoch, leader, views, runs_on = nil, nil, {}, {}
  for _, p in ipairs(members) do
    local v = last_view(p)
    if not v then return nil, p.node .. " printed no view yet" end
    if not v.joined or not v.stable or v.lost then
      return nil, p.node .. " is not joined and stable"
    end
    if #v.waiting > 0 or #v.release > 0 then return nil, p.node .. " is moving tasks" end
    epoch = epoch or v.epoch
    leader = leader or v.leader
    if v.epoch ~= epoch or v.leader ~= leader then return nil, "views differ" end
    local alive = 0
    for _, m in ipairs(v.members) do
      if m.state == "alive" then alive = alive + 1 end
    end
    if alive ~= #members then return nil, p.node .. " sees " .. alive .. " members" end
    for _, t in ipairs(v.running) do
      -- never transient: two views of one epoch cannot both run a task
      assert(not runs_on[t], "task " .. t .. " runs on " .. tostring(runs_on[t]) .. " and " ..
                             p.node .. " in epoch " .. epoch)
      runs_on[t] = p.node
    end
    views[p.node] = v
  end
  for t = 0, TASKS - 1 do
    if not runs_on[t] then return nil, "task " .. t .. " runs nowhere" end
  end
  return epoch, views, runs_on
end

local function wait_converged(members, timeout)
  return helpers.eventually(function() return converged(members) end, timeout or 20, 0.05)
end

-- The (start, stop) times of every task on every member; a task still running ends at
-- ends[node] (a member killed with SIGKILL) or now. Fails if one task ran on two nodes at
-- once. Returns intervals[task] = { { node, from, to, why }, ... }.
local function ownership(members, ends)
  local intervals, now = {}, wall_ms()
  local function add(t, node, from, to, why)
    intervals[t] = intervals[t] or {}
    table.insert(intervals[t], { node = node, from = from, to = to, why = why })
  end
  for _, p in ipairs(members) do
    local open = {}
    for _, e in ipairs(events(p)) do
      if e.ev == "start" then
        assert(not open[e.task], p.node .. " started task " .. e.task .. " twice")
        open[e.task] = e.t
      elseif e.ev == "stop" then
        assert(open[e.task], p.node .. " stopped task " .. e.task .. " it did not run")
        add(e.task, p.node, open[e.task], e.t, e.why)
        open[e.task] = nil
      end
    end
    for t, from in pairs(open) do add(t, p.node, from, ends[p.node] or now, "running") end
  end
  for t, list in pairs(intervals) do
    for i = 1, #list do
      for j = i + 1, #list do
        local a, b = list[i], list[j]
        if a.node ~= b.node and a.from < b.to and b.from < a.to then
          error(string.format("task %d ran on %s [%d, %d] and on %s [%d, %d] at once", t, a.node,
                              a.from, a.to, b.node, b.from, b.to), 2)
        end
      end
    end
  end
  return intervals
end

-- When `node` started task t last (wall ms), or nil.
local function started_at(p, t)
  local at
  for _, e in ipairs(events(p)) do
    if e.ev == "start" and e.task == t then at = e.t end
  end
  return at
end

local function count(list) return #list end

describe("membership through the control topic", function()
  setup(function()
    local st, _, err = helpers.run({ "scripts/bench/settle", "--build" },
                                   { name = "settle-build", timeout = 180 })
    assert(st == 0, "scripts/bench/settle --build failed:\n" .. tostring(err))
  end)
  after_each(helpers.cleanup)

  it("converges on one epoch and leader with balanced tasks; a joiner gets tasks only after "
     .. "their owners release them", function()
    helpers.with_timeout(40, function()
      local broker = helpers.start_broker {}
      local racks = { n1 = "a", n2 = "b", n3 = "c", n4 = "a" }
      local m = {}
      for _, node in ipairs { "n1", "n2", "n3" } do
        m[#m + 1] = start_member(broker, "ms1", node, racks[node])
      end
      local epoch3, views3, runs3 = wait_converged(m)
      helpers.trace("3 members settled at epoch %d", epoch3)

      -- one leader, that all agree on
      local leaders = 0
      for node, v in pairs(views3) do
        if v.is_leader then
          leaders = leaders + 1
          assert.equal(node, v.leader)
        end
      end
      assert.equal(1, leaders)
      -- balanced: 12 tasks over 3 single-thread members; one standby each, never beside its
      -- active, nor in its rack
      local standby_of = {}
      for node, v in pairs(views3) do
        assert.equal(4, count(v.running), node .. " runs " .. count(v.running) .. " tasks")
        for _, t in ipairs(v.standby) do
          assert.is_nil(standby_of[t], "task " .. t .. " has two standbys (K = 1)")
          standby_of[t] = node
        end
      end
      for t = 0, TASKS - 1 do
        local s = standby_of[t]
        assert.is_string(s, "task " .. t .. " has no standby")
        assert.are_not.equal(runs3[t], s)
        assert.are_not.equal(racks[runs3[t]], racks[s], "task " .. t .. ": active on " ..
                             runs3[t] .. " and standby on " .. s .. " share a rack")
      end

      -- a fourth member joins
      m[4] = start_member(broker, "ms1", "n4", racks.n4)
      local epoch4, views4, runs4 = wait_converged(m)
      helpers.trace("4 members settled at epoch %d", epoch4)
      assert.is_true(epoch4 > epoch3)
      for node, v in pairs(views4) do
        assert.equal(3, count(v.running), node .. " runs " .. count(v.running) .. " tasks")
        for _, t in ipairs(v.standby) do
          assert.are_not.equal(racks[runs4[t]], racks[node])
        end
      end
      -- what moved started on its new node only after its old node stopped it
      local by_node, moved = {}, 0
      for _, p in ipairs(m) do by_node[p.node] = p end
      local intervals = ownership(m, {})
      for t = 0, TASKS - 1 do
        if runs3[t] ~= runs4[t] then
          moved = moved + 1
          local stop
          for _, iv in ipairs(intervals[t]) do
            if iv.node == runs3[t] and iv.why == "release" then stop = iv.to end
          end
          assert.is_number(stop, "task " .. t .. " moved without a release by " .. runs3[t])
          local start = started_at(by_node[runs4[t]], t)
          assert.is_true(start >= stop, string.format("task %d started on %s at %d, before %s "
                                                      .. "stopped it at %d", t, runs4[t], start,
                                                      runs3[t], stop))
        end
      end
      assert.is_true(moved >= 3, "only " .. moved .. " tasks moved to the joiner")
    end)
  end)

  it("takes over a killed member's tasks within the session timeout and a heartbeat, a "
     .. "leaving one's at once, and never runs a task twice", function()
    helpers.with_timeout(40, function()
      local broker = helpers.start_broker {}
      local m = { start_member(broker, "ms2", "n1", "a"), start_member(broker, "ms2", "n2", "b"),
                  start_member(broker, "ms2", "n3", "c") }
      local _, views = wait_converged(m)

      -- kill -9: no leave notice; the others wait for its session to end
      local victim = views.n2.running
      local killed = wall_ms()
      m[2]:kill()
      local _, _, runs = wait_converged({ m[1], m[3] }, 15)
      local worst = 0
      for _, t in ipairs(victim) do
        local p = runs[t] == "n1" and m[1] or m[3]
        worst = math.max(worst, started_at(p, t) - killed)
      end
      helpers.trace("kill -9: tasks running again %d ms after the kill", worst)
      assert.is_true(worst <= SESSION + HB, "a killed member's tasks ran again only after " ..
                     worst .. " ms (session " .. SESSION .. ", heartbeat " .. HB .. ")")

      -- SIGTERM: the member stops its tasks, publishes a leave notice and exits 0
      local leaving = last_view(m[3]).running
      local termed = wall_ms()
      assert.equal(0, m[3]:stop())
      local _, _, runs1 = wait_converged({ m[1] }, 15)
      local slowest = 0
      for _, t in ipairs(leaving) do
        assert.equal("n1", runs1[t])
        slowest = math.max(slowest, started_at(m[1], t) - termed)
      end
      helpers.trace("leave: tasks running again %d ms after SIGTERM", slowest)
      assert.is_true(slowest < SESSION / 2, "a leaving member's tasks ran again only after " ..
                     slowest .. " ms")
      local ev = events(m[3])
      assert.equal("left", ev[#ev].ev)
      assert.is_true(ev[#ev].ok)

      ownership(m, { n2 = killed })
    end)
  end)

  it("a member cut off for longer than its session stops its tasks when it runs again, and "
     .. "rejoins as a new incarnation", function()
    helpers.with_timeout(40, function()
      local broker = helpers.start_broker {}
      local m = { start_member(broker, "ms3", "n1", "a"), start_member(broker, "ms3", "n2", "b"),
                  start_member(broker, "ms3", "n3", "c") }
      local _, views = wait_converged(m)
      local held, inc = views.n2.running, views.n2.inc
      assert.is_true(#held > 0)

      -- frozen: its heartbeats stop; the others take its tasks once its session ends
      assert.is_true(m[2]:signal(SIGSTOP))
      wait_converged({ m[1], m[3] }, 15)
      local resumed = wall_ms()
      assert.is_true(m[2]:signal(SIGCONT))

      -- it runs again: its first view says lost, and it stops everything it held. Its events
      -- arrive one by one, so the checks are retried until they all hold (a look at the first
      -- event alone once saw no view yet)
      local first = helpers.eventually(function()
        local after = {}
        for _, e in ipairs(events(m[2])) do
          if e.t >= resumed then after[#after + 1] = e end
        end
        local view
        for _, e in ipairs(after) do
          if e.ev == "view" then view = view or e end
        end
        assert.is_table(view)
        assert.is_true(view.lost, "the first view after the pause is not lost")
        local stopped = {}
        for _, e in ipairs(after) do
          if e.ev == "stop" then
            assert.equal("lost", e.why)
            stopped[e.task] = true
          end
        end
        for _, t in ipairs(held) do assert.is_true(stopped[t], "task " .. t .. " not stopped") end
        return view
      end, 10, 0.05)
      helpers.trace("paused member: lost %d ms after it ran again", first.t - resumed)

      -- then it rejoins as a new incarnation and the three settle again
      local epoch, views3 = wait_converged(m, 20)
      assert.is_true(views3.n2.inc > inc)
      helpers.trace("paused member: rejoined, epoch %d, %d ms after it ran again", epoch,
                    wall_ms() - resumed)
      -- the others never overlapped (n2 ran nothing while frozen and stopped on waking)
      ownership({ m[1], m[3] }, {})
    end)
  end)

  it("starts a member from the latest checkpoint of the view, not from the first record; on "
     .. "Kafka also once the log has lost its first records", function()
    helpers.with_timeout(60, function()
      local broker = helpers.start_broker {}
      local real = helpers.real_kafka()
      if real then
        -- the broker deletes the head while the members run: 2 s retention, 200 ms segments
        assert(broker:create_topic("ms4-control", 1, { ["retention.ms"] = 2000,
                                                       ["segment.ms"] = 200,
                                                       ["message.timestamp.type"] =
                                                         "LogAppendTime" }))
      end
      -- heartbeats every 20 ms make history fast (~100 records a second); a checkpoint at
      -- least every 300 ms of log time
      local fast = { "--heartbeat-ms", 20, "--session-ms", 1000, "--checkpoint-ms", 300 }
      local m = { start_member(broker, "ms4", "n1", "a", fast),
                  start_member(broker, "ms4", "n2", "b", fast) }
      wait_converged(m)
      helpers.sleep(6)
      local head
      if real then
        local se = helpers.offsets(broker.bootstrap, "ms4-control")[0]
        head = se[1]
        assert.is_true(se[1] > 0, "the broker deleted nothing yet: " .. se[1] .. " to " .. se[2])
        -- where a start begins: the checkpoint's offset, committed by the leader
        assert.is_true(helpers.committed(broker.bootstrap, "ms4-control", "ms4")[0] >= se[1])
      end
      m[3] = start_member(broker, "ms4", "n3", "c", fast)
      wait_converged(m)
      local log = m[3]:log()
      local at, after, bytes, left = log:match("starting from the checkpoint at offset (%d+) " ..
                                               "%(the view after offset (%d+), (%d+) bytes%): " ..
                                               "(%d+) records to read")
      assert.is_string(at, "n3 did not start from a checkpoint:\n" .. log)
      at, after, left = tonumber(at), tonumber(after), tonumber(left)
      helpers.trace("n3 started from the checkpoint at %d (after %d, %s bytes), %d records to "
                    .. "read", at, after, bytes, left)
      -- ~600 records of history; the checkpoint is recent and the rest is a few records
      assert.is_true(at > 300, "checkpoint at " .. at)
      assert.is_true(after < at)
      assert.is_true(left < 200, left .. " records to read")
      if real then assert.is_true(after + 1 >= head) end
      assert.not_matches("lost its first records", log)
      for _, p in ipairs(m) do assert.equal(0, p:stop()) end
    end)
  end)
end)
