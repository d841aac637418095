-- pageviews: page views per user per minute, a windowed aggregation in the
-- DSL (docs/dsl.md). Views arrive keyed by page; they are re-keyed by user
-- (through the repartition topic pageviews-views-per-minute-repartition),
-- counted per user in one-minute tumbling windows that take records up to
-- 10 s late, and each new count is written out.
--
--   in  (pageviews):             key "/home", {"user":"alice","page":"/home"}
--   out (pageviews-per-minute):  key "alice@1700000040000", {"user":"alice",
--                                "start":1700000040000,"end":1700000100000,"views":3}
--
-- Views that are not JSON objects with a "user" go to pageviews-dlq.
local beck = require "beck"
local dsl = require "beck.dsl"

local app = beck.app { id = "pageviews", on_error = "dlq" }

app:stream("pageviews", { value_serde = "json" })
   :filter(function(_, view)
     if type(view) ~= "table" or type(view.user) ~= "string" then
       error("not a view with a user: " .. dsl.serde.json.serialize(view))
     end
     return true
   end)
   :select_key(function(_, view) return view.user end)
   :group_by_key()
   :windowed_by(dsl.tumbling(60000):grace(10000))
   :count { store = "views-per-minute" }
   :to_stream()
   :map_values(function(views, w)
     return { user = w.key, start = w.start, ["end"] = w["end"], views = views }
   end, { value_serde = "json" })
   :to("pageviews-per-minute")

return app
