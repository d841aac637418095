-- orders_enrich: orders enriched with customer records, a stream-table join
-- in the DSL (docs/dsl.md). Customers are a table (the latest record per
-- customer id; a tombstone deletes one). Orders arrive keyed by order id;
-- they are re-keyed by customer (through the repartition topic
-- orders-enrich-enrich-left-repartition, as wide as the customers topic)
-- and each is written out with its customer's current record, or without
-- one when the customer is unknown (a left join).
--
--   customers:        key "c1", {"name":"Alice","tier":"gold"}
--   orders:           key "o1", {"id":"o1","customer":"c1","amount":12.5}
--   orders-enriched:  key "c1", {"order":"o1","amount":12.5,
--                                "customer":{"id":"c1","name":"Alice","tier":"gold"}}
--                     ("customer" left out when the customer is unknown)
--
-- Orders without a customer are dropped; values that are not JSON go to
-- orders-enrich-dlq.
local beck = require "beck"

local app = beck.app { id = "orders-enrich", on_error = "dlq" }

local customers = app:table("customers", { value_serde = "json", store = "customers" })

app:stream("orders", { value_serde = "json" })
   :filter(function(_, order) return type(order) == "table" and order.customer ~= nil end)
   :select_key(function(_, order) return tostring(order.customer) end)
   :left_join(customers, function(order, customer, id)
     local out = { order = order.id, amount = order.amount }
     if type(customer) == "table" then
       out.customer = { id = id, name = customer.name, tier = customer.tier }
     end
     return out
   end, { name = "enrich", result_serde = "json" })
   :to("orders-enriched")

return app
