-- Standby replicas across a restart of their own node (runtime/replica/standby.c):
-- the runner checkpoints what it applied, so a node stopped with SIGTERM and
-- started again on the same --state-dir and --node-id tails each replica's
-- changelog from where it left off, and has only what was written while it
-- was down to catch up on, not the changelog. And when a third node joins and
-- takes some of its standbys, the runner drops them cleanly: the node logs the
-- smaller set, keeps running and logs no error.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

-- Lines keyed by bucket (counts exact), bucket b written to partition b: each
-- line is 4 changelog updates of task 0_b.
local function make_lines(from, to, exact) return cluster.bucket_lines(from, to, exact, true) end

local committed_total, latest = cluster.committed_total, cluster.latest
local epochs, now_of, settled = cluster.epochs_in_log, cluster.now_of, cluster.settled

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local function node(bs, id, rack, state_dir)
  return cluster.start_node(bs, id, rack, cluster.STANDBY, {
    "--state-dir", state_dir,
    "--acceptable-recovery-lag", "200", "--probing-rebalance-interval-ms", "1000",
    -- every update reaches the changelog, so what a replica has to catch up
    -- on follows from the input written meanwhile
    "--cache-max-bytes", "0" })
end

-- The first "tailing" line of each task in a log: task -> { offset, behind }.
local function first_tailing(node)
  local out = {}
  for _, e in ipairs(node:events("standby_tailing", { store = "counts" })) do
    out[e.task] = out[e.task] or { offset = e.offset, behind = e.behind }
  end
  return out
end

-- "standbys: 0_3 lag 0 (...), ..." lines from line number `from` on: a list of task -> lag.
local function lag_lines(log, from)
  local out, no = {}, 0
  for line in log:gmatch("[^\n]+") do
    no = no + 1
    local list = no >= (from or 1) and line:match("standbys: (.*)$")
    if list then
      local lags = {}
      for t, lag in list:gmatch("(%d+_%d+) lag (%d+)") do lags[t] = tonumber(lag) end
      out[#out + 1] = lags
    end
  end
  return out
end

describe("standby replicas across a restart", function()
  after_each(helpers.cleanup)

  it("resume from their checkpoint after their node's restart, catch up, and are dropped "
     .. "cleanly when a joiner takes them", function()
    local broker = helpers.start_broker { topics = { "text-lines:12" } }
    local bs = broker.bootstrap
    local exact = {}
    local dirs = { na = helpers.tmpdir(), nb = helpers.tmpdir(), nc = helpers.tmpdir() }
    local nodes = { na = node(bs, "na", "a", dirs.na), nb = node(bs, "nb", "b", dirs.nb) }
    local ok, err = pcall(helpers.eventually, function() return settled(nodes, 6) end, 60, 0.2)
    if not ok then
      -- say where it got stuck: each node's epoch and member lines
      for id, n in pairs(nodes) do
        local lines = {}
        for l in n:log():gmatch("[^\n]+") do
          if l:match("epoch %d+") or l:match("leading") or l:match("ERROR") then
            lines[#lines + 1] = l
          end
        end
        print(id .. ":\n  " .. table.concat(lines, "\n  ", math.max(1, #lines - 15)))
      end
      error(err, 0)
    end

    -- state: 24,000 lines are 8,000 changelog updates per task
    local produced = 24000
    helpers.produce(bs, "text-lines", make_lines(1, produced, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == produced end, 60, 0.3)
    -- nb's standbys applied everything: a lag line (every 10 s) logged after
    -- the input was committed says 0 for each
    local _, mark_line = nodes.nb:log():gsub("[^\n]+", "")
    helpers.eventually(function()
      local lines = lag_lines(nodes.nb:log(), mark_line + 1)
      local last = lines[#lines]
      if not last or not next(last) then return false end
      for _, lag in pairs(last) do if lag ~= 0 then return false end end
      return true
    end, 30, 0.3)

    -- nb stops gracefully; 3,000 lines (1,000 updates per task) come in meanwhile
    assert.equal(0, nodes.nb:stop())
    local first_log = nodes.nb:log()
    helpers.eventually(function() return #now_of(nodes.na).running == 12 end, 20, 0.2)
    local down = 3000
    helpers.produce(bs, "text-lines", make_lines(produced + 1, produced + down, exact),
                    { timeout = 60 })
    produced = produced + down
    helpers.eventually(function() return committed_total(bs) == produced end, 60, 0.3)

    -- nb again, same node id and state directory
    nodes.nb = node(bs, "nb", "b", dirs.nb)
    local per_task = down * 4 / 12
    local tailing = helpers.eventually(function()
      local t = first_tailing(nodes.nb)
      local n = 0
      for _ in pairs(t) do n = n + 1 end
      return n >= 12 and t
    end, 30, 0.2)
    local resumed, behind, held = 0, 0, 0
    for t, r in pairs(tailing) do
      -- it resumed from its checkpoint, not from the changelog's start, and
      -- has about what was written while it was down to catch up on (the
      -- updates plus the commit markers)
      assert.is_true(r.offset >= 8000, t .. " tails from offset " .. r.offset)
      assert.is_true(r.behind >= per_task and r.behind <= per_task + 200,
                     t .. " is " .. r.behind .. " behind")
      resumed, behind, held = resumed + 1, behind + r.behind, held + r.offset + r.behind
    end
    assert.equal(12, resumed)
    -- it catches up: a lag line with every replica at 0, and balance back
    helpers.eventually(function()
      for _, lags in ipairs(lag_lines(nodes.nb:log())) do
        local all = next(lags) ~= nil
        for _, lag in pairs(lags) do if lag ~= 0 then all = false end end
        if all then return true end
      end
      return false
    end, 30, 0.3)
    helpers.eventually(function() return settled(nodes, 6) end, 30, 0.2)
    print(string.format("\n  restarted node: %d replica(s) resumed from their checkpoints, %d "
                        .. "changelog record(s) behind of %d held (%d written while down)",
                        resumed, behind, held, down * 4))

    -- a third node joins while input flows; some of nb's standbys move to it
    local sb_before = set_of(now_of(nodes.nb).standby)
    local mark = #epochs(nodes.nb)
    nodes.nc = node(bs, "nc", "c", dirs.nc)
    local t_join = helpers.now()
    while not settled(nodes, 4) do
      assert(helpers.now() - t_join < 40, "no balance 40 s after nc joined")
      helpers.produce(bs, "text-lines", make_lines(produced + 1, produced + 60, exact))
      produced = produced + 60
      helpers.sleep(0.3)
    end
    helpers.eventually(function() return committed_total(bs) == produced end, 60, 0.3)

    -- nb's log shows its standby set shrink, then lists only what it keeps
    local hist = epochs(nodes.nb)
    local shrink
    for i = mark + 1, #hist do
      if #hist[i].standby < #hist[i - 1].standby then shrink = shrink or hist[i] end
    end
    assert.is_not_nil(shrink, "no epoch line of nb shows fewer standbys")
    local now = now_of(nodes.nb)
    local keep = set_of(now.standby)
    local dropped = {}
    for t in pairs(sb_before) do if not keep[t] then dropped[#dropped + 1] = t end end
    table.sort(dropped)
    assert.is_true(#dropped >= 2, "nb dropped " .. #dropped .. " standby(s)")
    -- the runner restarted with the smaller set lists only what nb keeps
    local last_change = hist[#hist]
    for i = #hist, mark + 1, -1 do
      if table.concat(hist[i].standby, " ") ~= table.concat(hist[i - 1].standby, " ") then
        last_change = hist[i]
        break
      end
    end
    local after = helpers.eventually(function()
      local l = lag_lines(nodes.nb:log(), last_change.line)
      return #l >= 1 and l
    end, 15, 0.3)
    for _, lags in ipairs(after) do
      for _, t in ipairs(dropped) do assert.is_nil(lags[t], "dropped " .. t .. " still listed") end
      for t in pairs(keep) do assert.is_not_nil(lags[t], "kept " .. t .. " not listed") end
    end
    -- and nothing went wrong: no error in either of nb's logs, and it runs on
    for _, log in ipairs { first_log, nodes.nb:log() } do
      assert.is_nil(log:match("[^\n]*ERROR[^\n]*"), "an error in nb's log")
    end
    assert.is_true(nodes.nb:alive())
    print(string.format("  after the join nb dropped standby(s) %s (epoch %d), keeps %d",
                        table.concat(dropped, " "), shrink.epoch, #now.standby))

    local kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, n in pairs(exact) do assert.equal(n, kv[w], "count of " .. w) end
    for _, n in pairs(nodes) do assert.equal(0, n:stop()) end
  end)
end)
