-- Global tables (docs/dsl.md, "Global tables"): two nodes of spec/fixtures/global_join.lua
-- each hold all of a table of customers read from a 3-partition topic, and join orders
-- from a 2-partition topic against it by a key taken from the order's value. Orders
-- written before the nodes start find every customer written before them too (a node
-- catches its global tables up before its tasks run); an update and a tombstone reach
-- both nodes; each node answers a query for any customer itself; a restart reads only
-- what came since; a missing topic stops the start with its name.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local CUSTOMERS = 200

local http = helpers.http_get

local function start(bs, id, dir)
  return helpers.start_node("spec/fixtures/global_join.lua", {
    "-b", bs, "--cluster", "1", "--node-id", id, "--state-dir", dir,
    "--commit-interval-ms", "200", "--heartbeat-interval-ms", "200",
    "--session-timeout-ms", "2000", "--endpoint", "127.0.0.1:0" }, { name = id })
end

local function url_of(node)
  return node:query_url(30)
end

-- The outputs so far: order key -> "<amount> <name>".
local function outputs(bs)
  local out = {}
  for _, r in ipairs(helpers.consume(bs, "global-out", { timeout = 10 })) do out[r.key] = r.value end
  return out
end

describe("a global table", function()
  after_each(helpers.cleanup)

  it("is whole on every node before its tasks run, follows its topic, and answers queries",
     function()
    helpers.with_timeout(240, function()
      local broker = helpers.start_broker { topics = { "global-customers:3", "global-orders:2",
                                                       "global-out:2" } }
      local bs = broker.bootstrap
      local customers = {}
      for i = 1, CUSTOMERS do customers[i] = { key = "c" .. i, value = "name" .. i } end
      helpers.produce(bs, "global-customers", customers)
      -- orders before any node runs: each must find its customer (c0 has none)
      local orders = {}
      for i = 0, CUSTOMERS do orders[#orders + 1] = { key = "o" .. i, value = "c" .. i .. " " .. i } end
      helpers.produce(bs, "global-orders", orders)

      local dirs = { helpers.tmpdir(), helpers.tmpdir() }
      local nodes = { n1 = start(bs, "n1", dirs[1]), n2 = start(bs, "n2", dirs[2]) }
      -- one task each (the orders' two partitions)
      helpers.eventually(function()
        return (cluster.running(nodes.n1) or 0) == 1 and (cluster.running(nodes.n2) or 0) == 1
      end, 60, 0.2)
      -- each node caught up with the whole table before its task ran
      for id, node in pairs(nodes) do
        -- (the epoch assigns its task before the task has opened: wait for it to go live)
        local live = node:wait_event("task", { role = "active", to = "live" }, 30)
        local e = node:last_event("global_caught_up")
        assert.is_table(e, id .. ": " .. node:events_tail())
        assert.equal(CUSTOMERS, e.records, id)
        assert.is_true(live.seq > e.seq, id .. ": a task went live before the catch-up")
      end
      local got = helpers.eventually(function()
        local out = outputs(bs)
        local n = 0
        for _ in pairs(out) do n = n + 1 end
        return n == CUSTOMERS + 1 and out, n .. " of " .. (CUSTOMERS + 1) .. " orders out"
      end, 60, 0.3)
      for i = 1, CUSTOMERS do assert.equal(i .. " name" .. i, got["o" .. i]) end
      assert.equal("0 nil", got.o0)

      -- an update and a tombstone: both nodes see them, and the next orders join with them
      helpers.produce(bs, "global-customers", { { key = "c1", value = "renamed" },
                                                { key = "c2", value = nil } })
      for _, node in pairs(nodes) do
        local url = url_of(node)
        helpers.eventually(function()
          local s1, b1 = http(url, "/v1/stores/customers/keys/c1")
          local s2 = http(url, "/v1/stores/customers/keys/c2")
          return s1 == 200 and b1.value == "renamed" and s2 == 404,
                 tostring(s1) .. " " .. tostring(b1 and b1.value) .. " " .. tostring(s2)
        end, 30, 0.2)
        -- any key, answered by this node itself
        local st, body = http(url, "/v1/stores/customers/keys/c" .. CUSTOMERS)
        assert.equal(200, st)
        assert.equal("name" .. CUSTOMERS, body.value)
        assert.is_true(body.global)
        -- a scan, a page at a time, from this node's copy
        local sst, page = http(url, "/v1/stores/customers/prefix/c1?limit=5")
        assert.equal(200, sst)
        assert.same({ "c1", "c10", "c100", "c101", "c102" },
                    (function()
                      local ks = {}
                      for _, it in ipairs(page.items) do ks[#ks + 1] = it.key end
                      return ks
                    end)())
        assert.equal("renamed", page.items[1].value)
        assert.is_string(page.cursor)
        local _, page2 = http(url, "/v1/stores/customers/prefix/c1?limit=5&cursor=" .. page.cursor)
        assert.equal("c103", page2.items[1].key)
        local _, list = http(url, "/v1/stores")
        local found
        for _, s in ipairs(list.stores) do if s.store == "customers" then found = s end end
        assert.equal("global", found.kind)
        assert.equal("global-customers", found.topic)
        local _, status = http(url, "/v1/status")
        assert.equal("customers", status.global_tables[1].table)
        assert.equal("global-customers", status.global_tables[1].topic)
        local _, _, metrics = http(url, "/metrics")
        assert.matches('beck_global_records_total{[^}]*store="customers"} ' .. (CUSTOMERS + 2),
                       metrics)
      end
      helpers.produce(bs, "global-orders", { { key = "p1", value = "c1 5" },
                                             { key = "p2", value = "c2 6" } })
      got = helpers.eventually(function()
        local out = outputs(bs)
        return out.p1 and out.p2 and out, "p1 and p2 not out yet"
      end, 30, 0.3)
      assert.equal("5 renamed", got.p1)
      assert.equal("6 nil", got.p2)

      -- a restart reads only what came since its offsets
      assert.equal(0, nodes.n1:stop(), nodes.n1:log():sub(-2000))
      helpers.produce(bs, "global-customers", { { key = "c3", value = "later" } })
      nodes.n1 = start(bs, "n1", dirs[1])
      helpers.eventually(function()
        return nodes.n1:last_event("global_caught_up"), "not caught up"
      end, 60, 0.2)
      -- (its state dir kept the table: only the record since is read)
      assert.equal(1, nodes.n1:last_event("global_caught_up").records)
      local url = url_of(nodes.n1)
      local st, body = http(url, "/v1/stores/customers/keys/c3")
      assert.equal(200, st)
      assert.equal("later", body.value)
      for id, node in pairs(nodes) do assert.equal(0, node:stop(), id .. ": " .. node:log():sub(-2000)) end
    end)
  end)

  it("catches up on a topic written in transactions (it ends in a commit marker)", function()
    helpers.with_timeout(120, function()
      local broker = helpers.start_broker { topics = { "global-customers:2", "global-orders:2",
                                                       "global-out:2" } }
      local bs = broker.bootstrap
      local rows = {}
      for i = 1, 20 do rows[i] = { key = "c" .. i, value = "name" .. i } end
      helpers.produce(bs, "global-customers", rows, { transactional = true })
      helpers.produce(bs, "global-orders", { { key = "o1", value = "c7 1" } })
      local node = helpers.start_node("spec/fixtures/global_join.lua", { "-b", bs },
                                      { name = "txn" })
      local out = helpers.eventually(function()
        local got = helpers.consume(bs, "global-out", { timeout = 5 })
        return #got > 0 and got, "no output; the node's log ends:\n" .. node:log():sub(-1500)
      end, 60, 0.3)
      assert.equal("1 name7", out[1].value)
      assert.equal(0, node:stop(), node:log():sub(-2000))
    end)
  end)

  it("whose topic is missing stops the start and names it", function()
    helpers.with_timeout(120, function()
      local broker = helpers.start_broker { topics = { "global-orders:2", "global-out:2" } }
      local node = helpers.start_node("spec/fixtures/global_join.lua",
                                      { "-b", broker.bootstrap }, { name = "missing" })
      local st = node:wait(90)
      assert.is_not.equal(0, st)
      assert.matches("global table 'customers': its topic 'global%-customers' does not exist",
                     node:log())
    end)
  end)
end)
