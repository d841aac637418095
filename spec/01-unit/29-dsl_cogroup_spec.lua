-- beck.dsl cogroup (Kafka Streams' cogroup, KIP-150) through the test driver: several
-- groupings into one store, each record through its own grouping's adder; a grouping whose
-- key changed reads through its own repartition topic; windows; errors at the user's line.
local beck = require "beck"
local dsl = require "beck.dsl"
local testing = require "beck.testing"

local kvs = require("spec.helpers").kvs
local close_driver = require("spec.helpers").close_driver

describe("beck.dsl cogroup", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("aggregates each grouping's records with its own adder into one store", function()
    local app = beck.app { id = "cg1" }
    local clicks = app:stream("clicks"):group_by_key()
    local views = app:stream("views"):group_by_key()
    clicks:cogroup(function(_, v, agg) return agg .. "c" .. v end)
          :cogroup(views, function(_, v, agg) return agg .. "v" .. v end)
          :aggregate(function() return "" end, { store = "activity" })
          :to_stream():to("out")
    driver = testing.driver(app)
    driver:input("clicks"):pipe("a", "1", 10)
    driver:input("views"):pipe("a", "2", 11)
    driver:input("clicks"):pipe("b", "3", 12)
    driver:input("views"):pipe("a", nil, 13) -- no value: dropped, as by every aggregation
    driver:input("clicks"):pipe("a", "4", 14)
    assert.same({ { "a", "c1" }, { "a", "c1v2" }, { "b", "c3" }, { "a", "c1v2c4" } },
                kvs(driver:output("out"):read_all()))
    assert.equal("c1v2c4", driver:store("activity"):get("a"))
  end)

  it("repartitions a grouping whose key changed, through its own topic", function()
    local app = beck.app { id = "cg2" }
    local by_user = app:stream("orders"):group_by(function(_, v) return v:match("^(%w+)") end,
                                                   { name = "orders-by-user" })
    app:stream("refunds"):group_by_key()
       :cogroup(function(_, v, agg) return tostring(tonumber(agg) - tonumber(v)) end)
       :cogroup(by_user, function(_, v, agg) return tostring(tonumber(agg) + #v) end)
       :aggregate("0", { name = "balance" })
       :to_stream():to("out")
    local plan = app:describe()
    local topics = {}
    for _, t in ipairs(plan.topics) do topics[#topics + 1] = t.name or t end
    assert.matches("cg2%-orders%-by%-user%-repartition", table.concat(topics, " "))
    driver = testing.driver(app)
    driver:input("orders"):pipe("o1", "ann:xyz", 1)
    driver:input("refunds"):pipe("ann", "2", 2)
    assert.same({ ann = "5" }, driver:output("out"):read_key_values())
    assert.same({ "balance", "balance-merge", "balance-tag-1", "balance-tag-2" },
                (function()
                  local names = {}
                  for name in pairs(app.nodes) do
                    if name:match("^balance") then names[#names + 1] = name end
                  end
                  table.sort(names)
                  return names
                end)())
  end)

  it("aggregates over windows", function()
    local app = beck.app { id = "cg3" }
    local a = app:stream("a"):group_by_key()
    local b = app:stream("b"):group_by_key()
    a:cogroup(function(_, _, n) return n + 1 end)
     :cogroup(b, function(_, _, n) return n + 10 end)
     :windowed_by(dsl.tumbling(10))
     :aggregate(function() return 0 end, { value_serde = "number" })
     :to_stream():to("out")
    driver = testing.driver(app)
    driver:input("a"):pipe("k", "x", 1)
    driver:input("b"):pipe("k", "x", 5)
    driver:input("b"):pipe("k", "x", 12)
    assert.same({ { "k@0", "1" }, { "k@0", "11" }, { "k@10", "10" } },
                kvs(driver:output("out"):read_all()))
  end)

  it("says at the topology's line what it cannot cogroup", function()
    local app = beck.app { id = "cg4" }
    local g = app:stream("a"):group_by_key()
    local ok, err = pcall(function() g:cogroup(function() end):cogroup(app:stream("b"), print) end)
    assert.is_false(ok)
    assert.matches("29%-dsl_cogroup_spec.lua:%d+: cogroup: expected a grouped stream", err)
    ok, err = pcall(function() g:cogroup("add") end)
    assert.is_false(ok)
    assert.matches("29%-dsl_cogroup_spec.lua:%d+: cogroup", err)
  end)
end)
