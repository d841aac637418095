-- Foreign-key table-table joins (docs/dsl.md, "Foreign-key joins") on a broker, through
-- their subscription and response topics: spec/fixtures/fk_join.lua joins 4-partition
-- orders with 2-partition customers by the customer an order names (inner and left). Every
-- order's last result is its customer's last name, after orders move between customers,
-- customers are renamed and deleted, and the node is restarted in between.
local helpers = require "spec.helpers"

local ORDERS, CUSTOMERS = 120, 15

local function last_values(bs, topic)
  local out = {}
  for _, r in ipairs(helpers.consume(bs, topic, { timeout = 10 })) do out[r.key] = r.value end
  return out
end

describe("a foreign-key join", function()
  after_each(helpers.cleanup)

  it("gives every left row its foreign row's latest value, across changes of both sides",
     function()
    helpers.with_timeout(240, function()
      local broker = helpers.start_broker { topics = { "fk-orders:4", "fk-customers:2",
                                                       "fk-out:4", "fk-left-out:4" } }
      local bs = broker.bootstrap
      local state = helpers.tmpdir()
      local function start()
        local node = helpers.start_node("spec/fixtures/fk_join.lua",
                                        { "-b", bs, "--state-dir", state,
                                          "--commit-interval-ms", "100" }, { name = "fk" })
        node:wait_running(60)
        return node
      end
      local customers, orders = {}, {}
      local batch = {}
      for c = 1, CUSTOMERS do
        customers["c" .. c] = "name" .. c
        batch[#batch + 1] = { key = "c" .. c, value = "name" .. c }
      end
      helpers.produce(bs, "fk-customers", batch)
      local node = start()
      batch = {}
      for o = 1, ORDERS do
        orders["o" .. o] = "c" .. (o % (CUSTOMERS + 3) + 1) -- some name no customer
        batch[#batch + 1] = { key = "o" .. o, value = orders["o" .. o] .. " " .. o }
      end
      helpers.produce(bs, "fk-orders", batch)

      -- the expected last results: inner (nil: none, or a deletion) and left
      local function expect()
        local inner, left = {}, {}
        for o, c in pairs(orders) do
          local amount = o:sub(2)
          if c then
            local name = customers[c]
            left[o] = c .. " " .. amount .. " by " .. tostring(name)
            if name then inner[o] = c .. " " .. amount .. " by " .. name end
          end
        end
        return inner, left
      end
      local function settled(what)
        local inner, left = expect()
        helpers.eventually(function()
          local gi, gl = last_values(bs, "fk-out"), last_values(bs, "fk-left-out")
          for o in pairs(orders) do
            if gi[o] ~= inner[o] then
              return false, string.format("%s: inner %s: %s, want %s", what, o,
                                          tostring(gi[o]), tostring(inner[o]))
            end
            if gl[o] ~= left[o] then
              return false, string.format("%s: left %s: %s, want %s", what, o,
                                          tostring(gl[o]), tostring(left[o]))
            end
          end
          return true
        end, 60, 0.5)
      end
      settled("first")

      -- orders move, customers are renamed and deleted, some orders deleted
      batch = {}
      for o = 1, ORDERS, 3 do
        orders["o" .. o] = "c" .. ((o * 7) % CUSTOMERS + 1)
        batch[#batch + 1] = { key = "o" .. o, value = orders["o" .. o] .. " " .. o }
      end
      for o = 2, ORDERS, 10 do
        orders["o" .. o] = false
        batch[#batch + 1] = { key = "o" .. o, value = nil }
      end
      helpers.produce(bs, "fk-orders", batch)
      batch = {}
      for c = 1, CUSTOMERS, 2 do
        customers["c" .. c] = "renamed" .. c
        batch[#batch + 1] = { key = "c" .. c, value = "renamed" .. c }
      end
      customers.c4 = nil
      batch[#batch + 1] = { key = "c4", value = nil }
      helpers.produce(bs, "fk-customers", batch)
      settled("after the changes")

      -- a restart, then more changes on both sides
      assert.equal(0, node:stop(), node:log():sub(-2000))
      node = start()
      customers.c4 = "back4"
      helpers.produce(bs, "fk-customers", { { key = "c4", value = "back4" } })
      orders.o3 = "c4"
      helpers.produce(bs, "fk-orders", { { key = "o3", value = "c4 3" } })
      settled("after the restart")
      assert.equal(0, node:stop(), node:log():sub(-2000))
    end)
  end)
end)
