-- Versioned stores and tables (Kafka Streams' KIP-889 and KIP-914) through the test driver:
-- versions kept by their time whatever the order they come in, reads as of a time, the
-- history retention (puts older than it refused, reads older than it seeing the latest
-- version only), expiry; a versioned table's source forwarding its latest versions only,
-- and a stream joined with it as of each record's time.
local beck = require "beck"
local testing = require "beck.testing"

local close_driver = require("spec.helpers").close_driver
local ktv = require("spec.helpers").ktv

describe("a versioned store", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  -- a processor that runs `ops` (store calls) on each record: "put k v t", "del k t",
  -- "get k", "asof k t", "expire"; forwards each call's result as "<op>=<result>"
  local function store_app(retention)
    local app = beck.app { id = "v" }
    app:source("in", "in")
    app:processor("p", {
      init = function(ctx) ctx.vs = ctx:store("prices") end,
      process = function(ctx, _, line)
        local op, a, b, c = line:match("^(%S+)%s*(%S*)%s*(%S*)%s*(%S*)")
        local out
        if op == "put" then
          out = ctx.vs:put(a, b ~= "-" and b or nil, tonumber(c))
        elseif op == "del" then
          out = ctx.vs:delete(a, tonumber(b))
        elseif op == "get" then
          local v, t = ctx.vs:get(a)
          out = tostring(v) .. "/" .. tostring(t)
        elseif op == "asof" then
          local v, t = ctx.vs:get_as_of(a, tonumber(b))
          out = tostring(v) .. "/" .. tostring(t)
        end
        ctx:forward(line, tostring(out))
      end,
    }, "in")
    app:store("prices", { kind = "versioned", history_retention = retention }, "p")
    app:sink("out", "out", "p")
    return app
  end

  local function run(lines)
    local input, out = driver:input("in"), driver:output("out")
    local got = {}
    for _, l in ipairs(lines) do
      input:pipe("k", l, 0)
      got[#got + 1] = out:read().value
    end
    return got
  end

  it("keeps versions by time, in any order, and reads them as of a time", function()
    driver = testing.driver(store_app(1000))
    local latest = "-1" -- the latest version (Kafka Streams' PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    assert.same({ latest, latest, "300", "200", latest }, run {
      "put a 10 100", "put a 30 300", "put a 20 200", "put a 15 150", "put a 40 400" })
    assert.same({ "40/400", "nil/nil", "10/100", "15/150", "20/200", "20/200", "30/300" },
                run { "get a", "asof a 99", "asof a 100", "asof a 150", "asof a 250",
                      "asof a 299", "asof a 399" })
    -- the same time again replaces that version
    assert.same({ "300", "25/200" }, run { "put a 25 200", "asof a 250" })
    -- a deletion is a version too
    assert.same({ latest, "nil/500", "40/400" }, run { "del a 500", "asof a 600", "asof a 450" })
    -- driver:store reads the same
    local v, t = driver:store("prices"):get_as_of("a", 160)
    assert.equal("15", v)
    assert.equal(150, t)
  end)

  it("refuses puts older than the history retention, and reads before it see the latest only",
     function()
    driver = testing.driver(store_app(100))
    assert.same({ "-1", "-1", tostring(-math.huge) },
                run { "put a 1 1000", "put b 1 1200", "put a 0 1099" }) -- 1099 < 1200 - 100
    -- as of 1050, before 1200 - 100: the latest version only, when it is not newer
    assert.same({ "1/1000" }, run { "asof a 1050" })
    assert.same({ "-1", "1/1000", "nil/nil" },
                run { "put a 2 1150", "asof a 1120", "asof a 1050" })
  end)
end)

describe("a versioned table", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("forwards its latest versions only, and a stream joins it as of each record", function()
    local app = beck.app { id = "vt" }
    local prices = app:table("prices", { history_retention = 10000 })
    prices:to_stream():to("changes")
    app:stream("orders"):left_join(prices, function(o, p) return o .. "@" .. tostring(p) end)
       :to("out")
    driver = testing.driver(app)
    local p, o = driver:input("prices"), driver:input("orders")
    p:pipe("a", "10", 1000)
    p:pipe("a", "30", 3000)
    p:pipe("a", "20", 2000) -- older than the latest: kept, not forwarded
    assert.same({ { "a", 1000, "10" }, { "a", 3000, "30" } }, ktv(driver:output("changes"):read_all()))
    o:pipe("a", "o1", 2500)
    o:pipe("a", "o2", 3500)
    o:pipe("a", "o0", 500)
    p:pipe("a", nil, 4000)
    o:pipe("a", "o3", 4500)
    assert.same({ { "a", 2500, "o1@20" }, { "a", 3500, "o2@30" }, { "a", 500, "o0@nil" },
                  { "a", 4500, "o3@nil" } }, ktv(driver:output("out"):read_all()))
    assert.equal("20", (driver:store("table-1-store"):get_as_of("a", 2999)))
  end)

  it("is refused with a ttl or a bad retention, at the topology's line", function()
    local app = beck.app { id = "vt" }
    local ok, err = pcall(app.table, app, "t", { history_retention = -1 })
    assert.is_false(ok)
    assert.matches("43%-versioned_spec.lua:%d+: table: history_retention", err)
    ok, err = pcall(app.table, app, "t", { history_retention = 10, ttl = 5 })
    assert.is_false(ok)
    assert.matches("a versioned table %(history_retention%) has no ttl", err)
  end)
end)
