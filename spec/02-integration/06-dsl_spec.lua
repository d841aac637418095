-- The DSL end to end: scripts/examples/orders_enrich.lua (a stream-table
-- join behind a repartition topic) in its own process on a dev broker,
-- input written and output read by an outside client (python3-kafka).
local helpers = require "spec.helpers"
local cjson = require "cjson"

local TOPOLOGY = "scripts/examples/orders_enrich.lua"
local APP = "orders-enrich"
local CUSTOMERS, ORDERS, PARTITIONS = 200, 3000, 4

local function make_input()
  local customers, current = {}, {}
  for i = 1, CUSTOMERS do
    local id = "c" .. i
    customers[#customers + 1] = { id, cjson.encode { name = "name" .. i, tier = "t" .. i % 3 } }
    current[id] = { name = "name" .. i, tier = "t" .. i % 3 }
  end
  -- updates and tombstones: the table keeps the latest
  for i = 1, CUSTOMERS, 10 do
    local id = "c" .. i
    customers[#customers + 1] = { id, cjson.encode { name = "renamed" .. i, tier = "gold" } }
    current[id] = { name = "renamed" .. i, tier = "gold" }
  end
  for i = 5, CUSTOMERS, 20 do
    customers[#customers + 1] = { key = "c" .. i } -- tombstone
    current["c" .. i] = nil
  end
  local orders, want = {}, {}
  for i = 1, ORDERS do
    -- keyed by order id; customers c1..c210 (c201.. do not exist)
    local c = "c" .. (i * 7 % (CUSTOMERS + 10) + 1)
    local id = "o" .. i
    orders[i] = { id, cjson.encode { id = id, customer = c, amount = i } }
    want[id] = { customer = c, amount = i, record = current[c] }
  end
  -- orders the example drops or dead-letters
  orders[#orders + 1] = { "x1", '{"id":"x1","amount":1}' }
  orders[#orders + 1] = { "x2", "{not json" }
  return customers, orders, want
end

local function committed_total(bs, topic)
  local total = 0
  for _, o in pairs(helpers.committed(bs, topic, APP)) do total = total + o end
  return total
end

describe("the DSL on a dev broker", function()
  after_each(helpers.cleanup)

  it("enriches orders with customers through a repartition topic, end to end", function()
    helpers.with_timeout(150, function()
      local customers, orders, want = make_input()
      local broker = helpers.start_broker {
        topics = { "customers:" .. PARTITIONS, "orders:" .. PARTITIONS },
      }
      local bs = broker.bootstrap
      helpers.produce(bs, "customers", customers)
      local node = helpers.start_node(TOPOLOGY, { "-b", bs, "--commit-interval-ms", "200" })
      node:wait_running(30)
      -- the table first: the orders reach the join through a repartition topic, with
      -- their own timestamps (later than the customers'), and a task takes its partitions'
      -- records by timestamp (docs/dsl.md, Stream time); waiting for the customers'
      -- offsets also makes the updates and tombstones apply before any order
      helpers.eventually(function() return committed_total(bs, "customers") == #customers end,
                         30, 0.2)
      helpers.produce(bs, "orders", orders)

      local n = 0
      for _ in pairs(want) do n = n + 1 end
      local out = helpers.eventually(function()
        local got = helpers.consume(bs, "orders-enriched")
        return #got >= n and got, #got .. " of " .. n .. " records"
      end, 60, 0.5)
      assert.equal(n, #out)

      local seen, partition_of = {}, {}
      for _, r in ipairs(out) do
        local v = cjson.decode(r.value)
        local w = want[v.order]
        assert(w, "unexpected order " .. r.value)
        assert(not seen[v.order], "order " .. v.order .. " twice")
        seen[v.order] = true
        assert.equal(w.customer, r.key)
        assert.equal(w.amount, v.amount)
        if w.record then
          assert.same({ id = w.customer, name = w.record.name, tier = w.record.tier }, v.customer)
        else
          assert.is_nil(v.customer, "order " .. v.order .. " of unknown " .. w.customer)
        end
        partition_of[r.key] = partition_of[r.key] or r.partition
        assert.equal(partition_of[r.key], r.partition, "customer " .. r.key .. " in two partitions")
      end

      -- the runtime made the repartition topic as wide as the inputs
      local count, ends = helpers.count(bs, APP .. "-enrich-left-repartition")
      assert.equal(ORDERS, count)
      local parts = 0
      for _ in pairs(ends) do parts = parts + 1 end
      assert.equal(PARTITIONS, parts)
      local dead = helpers.consume(bs, APP .. "-dlq")
      assert.equal(1, #dead)
      assert.equal("{not json", dead[1].value)
      assert.equal(0, node:stop())
    end)
  end)

  it("beck describe prints the topics and subtopologies it will use", function()
    local st, out = helpers.run({ helpers.beck_bin(), "describe", TOPOLOGY })
    assert.equal(0, st)
    assert.matches("orders%-enrich%-enrich%-left%-repartition%s+repartition topic", out)
    assert.matches("orders%-enrich%-customers%-changelog%s+changelog of store customers", out)
    assert.matches("subtopology 1", out)
    assert.matches("processor enrich %[stores: customers%]%s+%(left_join, " ..
                   "scripts/examples/orders_enrich.lua:%d+%)", out)
  end)
end)
