-- scripts/examples/orders_filter.lua end to end on the embedded dev broker
-- (`beck run` without -b). The in-process test driver is a later issue;
-- until then the example is checked through a real node and an outside client.
local helpers = require "spec.helpers"
local cjson = require "cjson"

local TOPOLOGY = "scripts/examples/orders_filter.lua"

local line_of = require("spec.helpers").line_of

describe("examples/orders_filter.lua", function()
  after_each(helpers.cleanup)

  it("keeps paid orders, reshaped and keyed by customer; dead-letters malformed ones", function()
    helpers.with_timeout(40, function()
      local node = helpers.start_node(TOPOLOGY, {})
      local bs = node:dev_broker()
      assert.matches("^127%.0%.0%.1:%d+$", bs)
      node:wait_running()

      local orders = {
        { key = "c1", value = cjson.encode { id = "o1", customer = "c1", status = "paid",
                                             amount = 12.5, items = { { sku = "a" }, { sku = "b" } } } },
        { key = "c2", value = cjson.encode { id = "o2", customer = "c2", status = "new",
                                             amount = 3, items = { { sku = "a" } } } },
        { key = "c1", value = '{"id":"o3","customer":"c1","status":"paid","amount":7}' },
        { key = "c3", value = "{not json", headers = { source = "test" } },
        { key = "c4", value = '"just a string"' },
        -- no customer in the value: the record's key stands in
        { key = "c5", value = '{"id":"o6","status":"paid","amount":0.25,"items":[1,2,3]}' },
        { key = "c6", value = '{"id":"o7","customer":"c6","status":"cancelled","amount":1}' },
        { key = "c1", value = '{"id":"o8","customer":"c1","status":"paid","amount":100,' ..
                              '"items":"not a list"}' },
        { key = "c7" }, -- a tombstone (null value)
      }
      helpers.produce(bs, "orders", orders)

      local want = {
        { "c1", { order = "o1", amount = 12.5, items = 2 } },
        { "c1", { order = "o3", amount = 7, items = 0 } },
        { "c5", { order = "o6", amount = 0.25, items = 3 } },
        { "c1", { order = "o8", amount = 100, items = 0 } },
      }
      local out = helpers.eventually(function()
        local got = helpers.consume(bs, "paid-orders")
        return #got >= #want and got, #got .. " records"
      end, 20, 0.2)
      assert.equal(#want, #out)
      local by_order = {}
      for _, r in ipairs(out) do
        local v = cjson.decode(r.value)
        by_order[v.order] = { r.key, v, r.partition, r.offset }
      end
      for _, w in ipairs(want) do
        local got = by_order[w[2].order]
        assert.is_table(got, "order " .. w[2].order .. " missing")
        assert.equal(w[1], got[1])
        assert.same(w[2], got[2])
      end
      -- c1's orders stay in the order written
      assert.equal(by_order.o1[3], by_order.o3[3])
      assert.is_true(by_order.o1[4] < by_order.o3[4] and by_order.o3[4] < by_order.o8[4])

      local dlq = helpers.eventually(function()
        local got = helpers.consume(bs, "orders-filter-dlq")
        return #got >= 3 and got, #got .. " dead letters"
      end, 20, 0.2)
      assert.equal(3, #dlq)
      table.sort(dlq, function(a, b) return a.key < b.key end)
      local line = line_of(TOPOLOGY, 'error("not a JSON object')
      local src = {}
      for _, r in ipairs(helpers.consume(bs, "orders")) do src[r.key] = r end -- c3, c4, c7 once
      for i, d in ipairs(dlq) do
        local o = orders[({ 4, 5, 9 })[i]]
        assert.equal(o.key, d.key)
        assert.equal(o.value, d.value)
        assert.matches("^" .. TOPOLOGY:gsub("%p", "%%%0") .. ":" .. line ..
                       ": not a JSON object", d.headers["beck.error"] or "(none)")
        assert.equal("orders", d.headers["beck.topic"])
        local s = src[o.key]
        assert.equal(tostring(s.partition), d.headers["beck.partition"])
        assert.equal(tostring(s.offset), d.headers["beck.offset"])
      end
      assert.equal("test", dlq[1].headers.source)

      assert.equal(0, node:stop())
      assert.matches("app orders%-filter stopped: 9 in, 4 out, 0 skipped, 3 dead%-lettered",
                     node:log())
    end)
  end)

  it("prints the embedded broker's address as its first line, and stops on SIGTERM", function()
    local node = helpers.start_node(TOPOLOGY, {})
    local bs = node:dev_broker()
    node:wait_running()
    local first = node:stdout():match("^[^\n]*")
    assert.equal("dev broker: " .. bs, first)
    -- the node made its topics on its own broker: input 4 partitions, output as many
    local _, ends = helpers.count(bs, "paid-orders")
    local parts = 0
    for _ in pairs(ends) do parts = parts + 1 end
    assert.equal(4, parts)
    assert.equal(0, node:stop())
  end)
end)
