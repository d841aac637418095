-- A node's events (docs/events.md): what it did, one JSON object each, in the file the
-- `events` setting names and on /v1/events with a cursor. Two cluster nodes of wordcount:
-- each says it started, every epoch it applied with what it runs and stands by for, its
-- tasks going live; a node that leaves moves its tasks, which the other's next epoch and
-- "live" show; a stop says so. The file and the HTTP stream hold the same events.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local http = helpers.http_get
local TASKS = 4 -- wordcount on text-lines:4

local function names(list)
  local t = {}
  for _, x in ipairs(list) do t[#t + 1] = x end
  table.sort(t)
  return table.concat(t, " ")
end

describe("a node's events", function()
  after_each(helpers.cleanup)

  it("say what it started, each epoch's tasks, what went live, and its stop, in a file and "
     .. "over HTTP alike", function()
    local broker = helpers.start_broker { topics = { "text-lines:4", "word-counts:4" } }
    local bs = broker.bootstrap
    local a = cluster.start_node(bs, "na", "a", { "--endpoint", "127.0.0.1:0",
                                                  "--heartbeat-interval-ms", "200",
                                                  "--session-timeout-ms", "2000" })
    local b = cluster.start_node(bs, "nb", "b", { "--heartbeat-interval-ms", "200",
                                                  "--session-timeout-ms", "2000" })
    local started = a:wait_event("started", { app = "wordcount", cluster = true }, 20)
    assert.equal("na", started.node)
    assert.equal("a", started.rack)
    -- both settle: every task running on exactly one of them
    local ea, eb = helpers.eventually(function()
      local x, y = a:last_event("epoch"), b:last_event("epoch")
      if not (x and y and x.epoch == y.epoch and #x.running + #y.running == TASKS and
              #x.running > 0 and #y.running > 0) then
        return nil, "not settled:\n" .. a:events_tail() .. "\n" .. b:events_tail()
      end
      return x, y
    end, 40, 0.1)
    local seen = {}
    for _, t in ipairs(ea.running) do seen[t] = "na" end
    for _, t in ipairs(eb.running) do
      assert.is_nil(seen[t], t .. " runs on both")
      seen[t] = "nb"
    end
    -- each node's tasks went live on its stream thread
    a:wait_event("live", function(e) return #e.tasks > 0 end, 20)

    -- each task's life (docs/architecture.md, A task's life): one chain of moves, each
    -- from where the one before went, from free through opening and restoring to live
    local function life(node, task)
      local chain, at = {}, "free"
      for _, e in ipairs(node:events("task", { task = task, role = "active" })) do
        assert.equal(at, e.from, task .. ": " .. e.from .. " -> " .. e.to .. " after " .. at)
        assert.is_number(e.after_ms)
        chain[#chain + 1] = e.to
        at = e.to
      end
      return table.concat(chain, " ")
    end
    for _, t in ipairs(ea.running) do
      a:wait_event("task", { task = t, to = "live" }, 20)
      assert.matches("^opening restoring live", life(a, t))
    end

    -- the file and /v1/events hold the same events, in order; the cursor goes on from next
    local url = a:query_url(20)
    local file = a:events()
    local st, body = http(url, "/v1/events")
    assert.equal(200, st)
    assert.equal("na", body.node)
    assert.is_true(#body.events >= #file)
    for i, e in ipairs(file) do
      assert.equal(e.seq, body.events[i].seq)
      assert.equal(e.kind, body.events[i].kind)
    end
    assert.equal(1, body.first)
    -- /v1/status shows each task's state and for how long, which grows
    local function states()
      local code, st = http(url, "/v1/status")
      assert.equal(200, code)
      local m = {}
      for _, x in ipairs(st.tasks) do m[x.task] = x end
      return m
    end
    local s1 = states()
    for _, t in ipairs(ea.running) do
      assert.is_table(s1[t], t .. " is not in /v1/status's tasks")
      assert.equal("live", s1[t].state)
      assert.is_true(s1[t].for_ms >= 0)
    end
    helpers.sleep(0.3)
    local s2 = states()
    for _, t in ipairs(ea.running) do
      assert.is_true(s2[t].for_ms >= s1[t].for_ms + 200, t .. ": " .. s1[t].for_ms .. " then "
                     .. s2[t].for_ms)
    end

    local after = body.next
    st, body = http(url, "/v1/events?after=" .. after)
    assert.equal(200, st)
    assert.is_true(body.next >= after)
    for _, e in ipairs(body.events) do assert.is_true(e.seq > after) end
    st, body = http(url, "/v1/events?limit=1")
    assert.equal(200, st)
    assert.equal(1, #body.events)
    assert.equal(1, body.next)
    st = http(url, "/v1/events?after=x")
    assert.equal(400, st)

    -- `beck status` with the topology asks each active node with an endpoint for its tasks'
    -- states: na's are live; nb serves no queries, so its tasks' are unknown (null)
    local st2, out, err = helpers.run({ helpers.beck_bin(), "status", "-b", bs, cluster.WORDCOUNT,
                                        "--json" }, { name = "status", timeout = 30 })
    assert.equal(0, st2, err)
    local status = require("cjson").decode(out)
    local on_a, on_b = 0, 0
    for _, t in ipairs(status.tasks) do
      if t.active == "na" then
        assert.equal("live", t.state, t.name)
        assert.is_true(t.state_for_ms >= 0)
        on_a = on_a + 1
      elseif t.active == "nb" then
        assert.equal(require("cjson").null, t.state, t.name)
        assert.equal(-1, t.state_for_ms)
        on_b = on_b + 1
      end
    end
    assert.is_true(on_a > 0 and on_b > 0, on_a .. " on na, " .. on_b .. " on nb")
    st2, out = helpers.run({ helpers.beck_bin(), "status", "-b", bs, cluster.WORDCOUNT },
                           { name = "status", timeout = 30 })
    assert.equal(0, st2)
    assert.matches("TASK +ACTIVE +STATE", out)
    assert.matches("\n0_%d +n[ab] +[%-l]", out)

    -- nb leaves: na takes all of them, and says so in its next epoch; nb's last event is its stop
    local before = #a:events()
    assert.equal(0, b:stop())
    local stopped = b:last_event("stopped")
    assert.is_table(stopped, b:events_tail())
    assert.is_false(stopped.failed)
    -- nb's tasks ended their life there free, released at its stop
    for _, t in ipairs(eb.running) do
      assert.matches("live free$", life(b, t))
    end
    local e = a:wait_event("epoch", function(x) return #x.running == TASKS end, 30, before)
    local all = {}
    for _, t in ipairs(ea.running) do all[#all + 1] = t end
    for _, t in ipairs(eb.running) do all[#all + 1] = t end
    assert.equal(names(all), names(e.running))
    assert.is_true(e.gained == #eb.running, "gained " .. tostring(e.gained))
    assert.equal(0, a:stop())
  end)
end)
