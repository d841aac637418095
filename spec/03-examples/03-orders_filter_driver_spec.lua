-- scripts/examples/orders_filter.lua through the test driver (beck.testing):
-- the same file that 01-orders_filter_spec.lua runs on the dev broker, here
-- in process, with its own on_error = "dlq".
local testing = require "beck.testing"
local cjson = require "cjson"

local TOPOLOGY = "scripts/examples/orders_filter.lua"

local line_of = require("spec.helpers").line_of
local close_driver = require("spec.helpers").close_driver

local function decoded(records)
  local list = {}
  for i, r in ipairs(records) do list[i] = { r.key, cjson.decode(r.value) } end
  return list
end

local ORDERS = {
  { "c1", cjson.encode { id = "o1", customer = "c1", status = "paid", amount = 12.5,
                         items = { { sku = "a" }, { sku = "b" } } } },
  { "c2", cjson.encode { id = "o2", customer = "c2", status = "new", amount = 3,
                         items = { { sku = "a" } } } },
  { "c1", '{"id":"o3","customer":"c1","status":"paid","amount":7}' },
  { "c3", "{not json", 3000, { source = "test" } },
  { "c4", '"just a string"' },
  -- no customer in the value: the record's key stands in
  { "c5", '{"id":"o6","status":"paid","amount":0.25,"items":[1,2,3]}' },
  { "c6", '{"id":"o7","customer":"c6","status":"cancelled","amount":1}' },
  { "c1", '{"id":"o8","customer":"c1","status":"paid","amount":100,"items":"not a list"}' },
  { "c7", nil }, -- a tombstone
  -- keyed by customer even when the record's key is something else
  { "shop-9", '{"id":"o10","customer":"c9","status":"paid","amount":5,"items":[{}]}' },
}

describe("examples/orders_filter.lua (test driver)", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("keeps paid orders, reshaped and keyed by customer", function()
    driver = testing.driver(TOPOLOGY)
    driver:input("orders"):pipe_list(ORDERS)
    assert.same({
      { "c1", { order = "o1", amount = 12.5, items = 2 } },
      { "c1", { order = "o3", amount = 7, items = 0 } },
      { "c5", { order = "o6", amount = 0.25, items = 3 } },
      { "c1", { order = "o8", amount = 100, items = 0 } },
      { "c9", { order = "o10", amount = 5, items = 1 } },
    }, decoded(driver:output("paid-orders"):read_all()))
  end)

  it("dead-letters what is not a JSON object, with the error's file:line and the origin",
     function()
    driver = testing.driver(TOPOLOGY)
    driver:input("orders"):pipe_list(ORDERS)
    local dlq = driver:output("orders-filter-dlq"):read_all()
    assert.equal(3, #dlq)
    local line = line_of(TOPOLOGY, 'error("not a JSON object')
    local want = { { "c3", "{not json", 3 }, { "c4", '"just a string"', 4 }, { "c7", nil, 8 } }
    for i, d in ipairs(dlq) do
      local key, value, offset = want[i][1], want[i][2], want[i][3]
      assert.equal(key, d.key)
      assert.equal(value, d.value)
      assert.matches("^" .. TOPOLOGY:gsub("%p", "%%%0") .. ":" .. line .. ": not a JSON object",
                     d.headers["beck.error"])
      assert.equal("orders", d.headers["beck.topic"])
      assert.equal("0", d.headers["beck.partition"])
      assert.equal(tostring(offset), d.headers["beck.offset"])
    end
    -- the record's own timestamp and headers go along
    assert.equal(3000, dlq[1].timestamp)
    assert.equal("test", dlq[1].headers.source)
    -- a dead letter does not stop the app
    local paid = driver:output("paid-orders")
    assert.equal(5, #paid:read_all())
    driver:input("orders"):pipe("c1", '{"id":"o11","customer":"c1","status":"paid","amount":1}')
    assert.same({ { "c1", { order = "o11", amount = 1, items = 0 } } }, decoded(paid:read_all()))
  end)

  it("drops orders that are not paid, writing nothing", function()
    driver = testing.driver(TOPOLOGY)
    driver:input("orders"):pipe_list {
      { "c2", '{"id":"o2","customer":"c2","status":"new","amount":3}' },
      { "c6", '{"id":"o7","customer":"c6","status":"cancelled","amount":1}' },
      { "c8", '{"id":"o9","customer":"c8","amount":1}' },
      { "c8", "{}" },
    }
    assert.is_true(driver:output("paid-orders"):is_empty())
    assert.is_true(driver:output("orders-filter-dlq"):is_empty())
  end)

  it("carries each order's timestamp and headers to its output", function()
    driver = testing.driver(TOPOLOGY)
    driver:input("orders"):pipe("c1", '{"id":"o1","customer":"c1","status":"paid","amount":2}',
                                1700000000000, { trace = "t-42" })
    local r = driver:output("paid-orders"):read()
    assert.equal(1700000000000, r.timestamp)
    assert.same({ trace = "t-42" }, r.headers)
  end)

  it("keeps a customer's orders in order, on the customer's partition", function()
    driver = testing.driver(TOPOLOGY, { partitions = 4 })
    driver:input("orders"):pipe_list(ORDERS)
    local by_customer = {}
    for _, r in ipairs(driver:output("paid-orders"):read_all()) do
      local list = by_customer[r.key] or {}
      by_customer[r.key] = list
      list[#list + 1] = { cjson.decode(r.value).order, r.partition }
    end
    local c1 = by_customer.c1
    assert.same({ "o1", "o3", "o8" }, { c1[1][1], c1[2][1], c1[3][1] })
    assert.equal(c1[1][2], c1[2][2])
    assert.equal(c1[1][2], c1[3][2])
    -- dead letters name the partition the record came from
    local ffi = require "ffi"
    for _, d in ipairs(driver:output("orders-filter-dlq"):read_all()) do
      assert.equal(tostring(ffi.C.bk_ffi_hash_partition(d.key, #d.key, 4)),
                   d.headers["beck.partition"])
    end
  end)

  it("fails on a malformed order when run with on_error = fail", function()
    driver = testing.driver(TOPOLOGY, { on_error = "fail" })
    local orders = driver:input("orders")
    orders:pipe("c1", '{"id":"o1","customer":"c1","status":"paid","amount":2}')
    local ok, err = pcall(orders.pipe, orders, "c3", "{not json")
    assert.is_false(ok)
    assert.matches("orders/0/1", err, 1, true)
    assert.matches(TOPOLOGY .. ":" .. line_of(TOPOLOGY, 'error("not a JSON object') ..
                   ": not a JSON object", err, 1, true)
  end)
end)
