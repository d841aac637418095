-- The node's own hooks (runtime/engine/hooks.h, runtime/cmd/cmd_run.c): on_assign(tasks), on_revoke(tasks)
-- and on_promote(task), run on the node's main thread in a VM of their own, here from a
-- --hooks file (spec/fixtures/node_hooks.lua) that logs one line per call. In a cluster with
-- standby replicas the calls track exactly the tasks each node runs, through joins, a
-- SIGKILL of a node (its standbys promoted: on_promote) and graceful stops; a hook that
-- raises is logged with its file and line and the node goes on; a node alone (no
-- --cluster) gets every task at start and gives every one back at stop.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local HOOKS = "spec/fixtures/node_hooks.lua"
local now_of, epochs, plain = cluster.now_of, cluster.epochs_in_log, cluster.plain

local function set_of(list)
  local s = {}
  for _, t in ipairs(list) do s[t] = true end
  return s
end

local function sorted(set)
  local l = {}
  for t in pairs(set) do l[#l + 1] = t end
  table.sort(l)
  return l
end

local function show(set) return "[" .. table.concat(sorted(set), " ") .. "]" end

-- The hook calls of log `log`, in order: { name = "on_assign", tasks = {...}, line = no }.
local function hook_calls(log)
  local out, no = {}, 0
  for line in log:gmatch("[^\n]+") do
    no = no + 1
    local name, rest = line:match("^hooks: (on_%a+) ?(.*)$")
    if name then out[#out + 1] = { name = name, tasks = cluster.words(rest), line = no } end
  end
  return out
end

-- Replays node n's on_assign / on_revoke calls in log order against its epoch lines: a task
-- is assigned only when not held, revoked only when held, and at every epoch line the tasks
-- held are those the line says the node runs. Returns the set held at the end of the log,
-- the calls after the last epoch line and the last epoch.
local function replay(id, n)
  local calls, eps = hook_calls(n:log()), epochs(n)
  local held, ci, after = {}, 1, {}
  local function apply(c, tail)
    if c.name == "on_assign" then
      for _, t in ipairs(c.tasks) do
        assert.is_nil(held[t], id .. ": on_assign of " .. t .. " it holds (line " .. c.line .. ")")
        held[t] = true
      end
    elseif c.name == "on_revoke" then
      for _, t in ipairs(c.tasks) do
        assert.is_true(held[t], id .. ": on_revoke of " .. t .. " it does not hold (line "
                       .. c.line .. ")")
        held[t] = nil
      end
    end
    if tail then after[#after + 1] = c end
  end
  for _, e in ipairs(eps) do
    while calls[ci] and calls[ci].line < e.line do
      apply(calls[ci])
      ci = ci + 1
    end
    assert.equal(show(set_of(e.running)), show(held),
                 id .. ": the hooks' tasks at its epoch " .. e.epoch .. " line (" .. e.line .. ")")
  end
  while calls[ci] do
    apply(calls[ci], true)
    ci = ci + 1
  end
  return held, after, eps[#eps]
end

-- task -> how many times node n's log says it was promoted / its on_promote was called.
local function promotions(log)
  local promoted, hooked = {}, {}
  for t in log:gmatch("task (%d+_%d+): promoted from standby to active") do
    promoted[t] = (promoted[t] or 0) + 1
  end
  for _, c in ipairs(hook_calls(log)) do
    if c.name == "on_promote" then
      assert.equal(1, #c.tasks, "on_promote with one task (line " .. c.line .. ")")
      hooked[c.tasks[1]] = (hooked[c.tasks[1]] or 0) + 1
    end
  end
  return promoted, hooked
end

-- The calls after n's last epoch line of a node that stopped gracefully: one on_revoke of
-- every task it ran, and nothing held any more.
local function assert_revoked_all(id, n)
  local held, after, last = replay(id, n)
  assert.is_true(#last.running > 0, id .. " ran tasks when it stopped")
  assert.equal(1, #after, id .. ": one hook call after its last epoch line")
  assert.equal("on_revoke", after[1].name)
  assert.equal(show(set_of(last.running)), show(set_of(after[1].tasks)),
               id .. ": on_revoke at stop")
  assert.equal("[]", show(held))
end

describe("the node's hooks", function()
  after_each(helpers.cleanup)

  it("track each cluster node's actives through joins, a SIGKILL (on_promote) and stops",
     function()
    helpers.with_timeout(55, function()
      local broker = helpers.start_broker { topics = { "text-lines:6" } }
      local bs = broker.bootstrap
      local hooks = { "--hooks", HOOKS }
      local nodes = {
        na = cluster.start_node(bs, "na", "a", cluster.STANDBY, hooks),
        nb = cluster.start_node(bs, "nb", "b", cluster.STANDBY, hooks),
        nc = cluster.start_node(bs, "nc", "c", cluster.STANDBY, hooks),
      }
      helpers.eventually(function() return cluster.settled(nodes, 2) end, 30, 0.2)
      local exact = {}
      helpers.produce(bs, "text-lines", cluster.bucket_lines(1, 600, exact))
      helpers.eventually(function() return cluster.committed_total(bs) == 600 end, 30, 0.3)
      -- the standbys hold the counts too before the kill
      helpers.eventually(function()
        for _, n in pairs(nodes) do
          if not n:log():match("standby %d+_%d+: applied %d+ changelog") and
             not n:log():match("standbys: [^\n]*lag 0") then
            return false
          end
        end
        return true
      end, 20, 0.2)
      for id, n in pairs(nodes) do
        replay(id, n)
        assert.is_truthy(n:log():match("\nhooks: on_assign "), id .. " logged on_assign")
      end

      -- SIGKILL of nc: its tasks go to na and nb, most by promotion of their standbys
      local victim = now_of(nodes.nc).running
      local dead = nodes.nc
      local before = { na = #nodes.na:log(), nb = #nodes.nb:log() }
      dead:kill()
      nodes.nc = nil
      helpers.eventually(function()
        return #now_of(nodes.na).running + #now_of(nodes.nb).running == 6
      end, 30, 0.2)
      helpers.produce(bs, "text-lines", cluster.bucket_lines(601, 900, exact))
      helpers.eventually(function() return cluster.committed_total(bs) == 900 end, 30, 0.3)

      -- (1) on every node, dead or alive, the hooks tracked its actives exactly
      replay("nc", dead)
      for id, n in pairs(nodes) do replay(id, n) end

      -- (2) every promotion a node logs got its on_promote there, and one of nc's tasks
      -- at least was promoted after the kill
      local promoted_after = 0
      for id, n in pairs({ na = nodes.na, nb = nodes.nb, nc = dead }) do
        local promoted, hooked = promotions(n:log())
        for t, k in pairs(promoted) do
          assert.equal(k, hooked[t], id .. ": on_promote calls of " .. t)
        end
        for t, k in pairs(hooked) do
          assert.equal(k, promoted[t], id .. ": promotions of " .. t)
        end
        if before[id] then
          local since = n:log():sub(before[id] + 1)
          for _, t in ipairs(victim) do
            if since:match("task " .. t .. ": promoted from standby to active") then
              assert.is_truthy(since:match("\nhooks: on_promote " .. t .. "\n"),
                               id .. ": on_promote " .. t .. " after the kill")
              promoted_after = promoted_after + 1
            end
          end
        end
      end
      print(string.format("\n  %d of nc's %d task(s) promoted after its SIGKILL",
                          promoted_after, #victim))
      assert.is_true(promoted_after >= 1, "a promotion after the kill")

      -- (3) a graceful stop revokes every task the node runs; nb takes na's over first
      assert.equal(0, nodes.na:stop())
      assert_revoked_all("na", nodes.na)
      helpers.eventually(function() return #now_of(nodes.nb).running == 6 end, 20, 0.2)
      assert.equal(0, nodes.nb:stop())
      assert_revoked_all("nb", nodes.nb)

      local kv = cluster.latest(helpers.consume(bs, "word-counts"))
      for w, k in pairs(exact) do assert.equal(k, kv[w], "count of " .. w) end
    end)
  end)

  it("that raises is logged with its file and line, and the node goes on", function()
    helpers.with_timeout(60, function()
      local broker = helpers.start_broker { topics = { "text-lines:3" } }
      local bs = broker.bootstrap
      local path = helpers.tmpdir() .. "/boom_hooks.lua"
      helpers.write_file(path, table.concat({
        "return {",
        "  on_assign = function(tasks)",
        "    error(\"boom\")",
        "  end,",
        "  on_revoke = function(tasks)",
        "    io.stderr:write(\"hooks: on_revoke \" .. table.concat(tasks, \" \") .. \"\\n\")",
        "  end,",
        "}",
        "",
      }, "\n"))
      local line = helpers.line_of(path, "error(\"boom\")")
      local n = cluster.start_node(bs, "na", "a", { "--hooks", path })
      -- (log text: the message is the feature, what an operator or a user reads)
      n:wait_log("hook on_assign failed: " .. plain(path) .. ":" .. line .. ": boom", 20)
      n:wait_event("epoch", function(e) return #e.running == 3 end, 20)
      local exact = {}
      helpers.produce(bs, "text-lines", cluster.bucket_lines(1, 120, exact))
      helpers.eventually(function()
        assert.is_true(n:alive(), "the node runs")
        return cluster.committed_total(bs) == 120
      end, 20, 0.2)
      local kv = cluster.latest(helpers.consume(bs, "word-counts"))
      for w, k in pairs(exact) do assert.equal(k, kv[w], "count of " .. w) end
      assert.equal(0, n:stop())
      -- the other hook of the file still runs
      assert.matches("\nhooks: on_revoke 0_0 0_1 0_2\n", n:log())
    end)
  end)

  it("of a node alone (no --cluster): every task assigned at start, revoked at stop",
     function()
    helpers.with_timeout(60, function()
      local broker = helpers.start_broker { topics = { "text-lines:4" } }
      local n = helpers.start_node(cluster.WORDCOUNT, { "-b", broker.bootstrap, "--hooks", HOOKS },
                                   { name = "alone" })
      n:wait_running(20)
      local calls = hook_calls(n:log())
      assert.equal(1, #calls, "one hook call at start")
      assert.equal("on_assign", calls[1].name)
      assert.equal("[0_0 0_1 0_2 0_3]", show(set_of(calls[1].tasks)))
      assert.equal(0, n:stop())
      calls = hook_calls(n:log())
      assert.equal(2, #calls, "one more hook call at stop")
      assert.equal("on_revoke", calls[2].name)
      assert.equal("[0_0 0_1 0_2 0_3]", show(set_of(calls[2].tasks)))
      assert.same({}, n:events("epoch"))
    end)
  end)
end)
