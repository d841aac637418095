-- orders_filter: a stateless topology. Reads JSON orders, drops the ones
-- that are not paid, and writes a reshaped record keyed by customer.
--
--   in  (orders):        {"id":"o1","customer":"c7","status":"paid","amount":12.5,"items":[...]}
--   out (paid-orders):   key c7, {"order":"o1","amount":12.5,"items":2}
local beck = require "beck"
local cjson = require "cjson.safe"

local app = beck.app { id = "orders-filter", on_error = "dlq" }

app:source("orders", "orders")

app:processor("parse", {
  process = function(ctx, key, value)
    local order, err = cjson.decode(value)
    if type(order) ~= "table" then
      error("not a JSON object: " .. tostring(err or value))
    end
    if order.status == "paid" then
      ctx:forward(order.customer or key, order)
    end
  end,
}, "orders")

app:processor("reshape", {
  process = function(ctx, customer, order)
    ctx:forward(customer, cjson.encode {
      order = order.id,
      amount = order.amount,
      items = type(order.items) == "table" and #order.items or 0,
    })
  end,
}, "parse")

app:sink("paid", "paid-orders", "reshape")

return app
