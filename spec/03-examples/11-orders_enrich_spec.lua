-- scripts/examples/orders_enrich.lua through the test driver: orders
-- enriched with customer records (a DSL stream-table left join), with
-- customer updates and tombstones, re-keying through the repartition topic,
-- and bad input dead-lettered.
local testing = require "beck.testing"
local close_driver = require("spec.helpers").close_driver
local cjson = require "cjson"

local TOPOLOGY = "scripts/examples/orders_enrich.lua"

local function order(id, customer, amount)
  return cjson.encode { id = id, customer = customer, amount = amount }
end

local function customer(name, tier)
  return cjson.encode { name = name, tier = tier }
end

local function decoded(records)
  local list = {}
  for i, r in ipairs(records) do list[i] = { r.key, cjson.decode(r.value) } end
  return list
end

describe("examples/orders_enrich.lua", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("writes each order with its customer's current record, keyed by customer", function()
    driver = testing.driver(TOPOLOGY)
    local customers, orders = driver:input("customers"), driver:input("orders")
    customers:pipe("c1", customer("Alice", "gold"))
    orders:pipe("o1", order("o1", "c1", 12.5))
    orders:pipe("o2", order("o2", "c2", 3))              -- unknown customer: no record
    customers:pipe("c1", customer("Alice", "platinum"))  -- an update
    orders:pipe("o3", order("o3", "c1", 7))
    customers:pipe("c1", nil)                            -- a tombstone deletes her
    orders:pipe("o4", order("o4", "c1", 1))
    assert.same({
      { "c1", { order = "o1", amount = 12.5,
                customer = { id = "c1", name = "Alice", tier = "gold" } } },
      { "c2", { order = "o2", amount = 3 } },
      { "c1", { order = "o3", amount = 7,
                customer = { id = "c1", name = "Alice", tier = "platinum" } } },
      { "c1", { order = "o4", amount = 1 } },
    }, decoded(driver:output("orders-enriched"):read_all()))
    assert.is_nil(driver:store("customers"):get("c1"))
  end)

  it("drops orders without a customer and dead-letters what is not JSON", function()
    driver = testing.driver(TOPOLOGY)
    local orders = driver:input("orders")
    orders:pipe("o1", '{"id":"o1","amount":1}')
    orders:pipe("o2", nil)
    orders:pipe("o3", "{not json")
    driver:input("customers"):pipe("c9", "[broken")
    assert.is_true(driver:output("orders-enriched"):is_empty())
    local dead = driver:output("orders-enrich-dlq"):read_all()
    assert.equal(2, #dead)
    assert.matches("topic orders: value: not JSON", dead[1].headers["beck.error"])
    assert.matches("table customers: value: not JSON", dead[2].headers["beck.error"])
  end)

  it("re-keys orders by customer to the customers' partitions", function()
    driver = testing.driver(TOPOLOGY, { partitions = 4 })
    for i = 1, 10 do
      driver:input("customers"):pipe("c" .. i, customer("name" .. i, "t" .. (i % 3)))
    end
    for i = 1, 30 do
      driver:input("orders"):pipe("o" .. i, order("o" .. i, "c" .. (i % 10 + 1), i))
    end
    local out = decoded(driver:output("orders-enriched"):read_all())
    assert.equal(30, #out)
    for _, r in ipairs(out) do
      local c = r[2].customer
      assert.is_table(c, "order " .. r[2].order .. " found no customer")
      assert.equal(r[1], c.id)
      assert.equal("name" .. c.id:sub(2), c.name)
    end
    -- every order found its customer: the repartition topic sent it to the
    -- task that holds the customer (orders were keyed by order id)
    local through = driver:output("orders-enrich-enrich-left-repartition"):read_all()
    assert.equal(30, #through)
    for i, r in ipairs(through) do assert.equal("c" .. (i % 10 + 1), r.key) end
  end)
end)
