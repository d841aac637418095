-- Global tables in the DSL (docs/dsl.md, "Global tables"), in the test driver: a stream
-- joined with a global table by a key the selector takes from each record, inner and left;
-- updates and tombstones of the table's topic; serdes; the declarations refused at load.
local beck = require "beck"
local testing = require "beck.testing"

local function values(d, topic)
  local out = {}
  for _, r in ipairs(d:output(topic):read_all()) do out[#out + 1] = r.key .. "=" .. tostring(r.value) end
  return out
end

describe("a global table", function()
  it("joins a stream by a key taken from each record (inner and left)", function()
    local app = beck.app { id = "g" }
    local countries = app:global_table("countries", { name = "countries-store" })
    app:stream("orders")
       :join(countries, function(_, v) return v:match("^(%w+)") end,
             function(v, c, k) return v .. " in " .. c .. " for " .. k end)
       :to("out")
    app:stream("visits")
       :left_join(countries, function(_, v) return v ~= "none" and v or nil end,
                  function(v, c) return v .. "/" .. tostring(c) end)
       :to("out2")
    local d = testing.driver(app)
    d:input("countries"):pipe("fr", "France")
    d:input("orders"):pipe("o1", "fr 3")
    d:input("orders"):pipe("o2", "de 3") -- no row: nothing
    d:input("orders"):pipe("o3", nil)    -- no value: dropped
    d:input("visits"):pipe("v1", "de")
    d:input("visits"):pipe("v2", "none") -- the selector gives nil: a left join's nil row
    d:input("countries"):pipe("de", "Germany")
    d:input("visits"):pipe("v3", "de")
    d:input("countries"):pipe("fr", nil) -- a tombstone deletes the row
    d:input("orders"):pipe("o4", "fr 1")
    assert.same({ "o1=fr 3 in France for o1" }, values(d, "out"))
    assert.same({ "v1=de/nil", "v2=none/nil", "v3=de/Germany" }, values(d, "out2"))
    assert.is_nil(d:store("countries-store"):get("fr"))
    assert.equal("Germany", d:store("countries-store"):get("de"))
    d:close()
  end)

  it("reads its rows with its serdes", function()
    local app = beck.app { id = "g" }
    local users = app:global_table("users", { key_serde = "json", value_serde = "json" })
    app:stream("clicks", { value_serde = "json" })
       :join(users, function(_, v) return { id = v.user } end,
             function(v, u) return v.page .. " by " .. u.name end)
       :to("out")
    local d = testing.driver(app)
    d:input("users"):pipe('{"id":7}', '{"name":"ann"}')
    d:input("clicks"):pipe("c1", '{"user":7,"page":"/a"}')
    assert.same({ "c1=/a by ann" }, values(d, "out"))
    d:close()
  end)

  it("is read-only to processors, and any processor may read it", function()
    local app = beck.app { id = "g" }
    app:global_store("names", "names-topic")
    app:source("in", "in")
    app:processor("p", {
      process = function(ctx, k)
        local st = ctx:store("names")
        ctx:forward(k, tostring(st:get(k)))
        local ok, err = pcall(st.put, st, k, "x")
        assert(not ok and err:match("global table 'names' is read%-only"), err)
      end,
    }, "in")
    app:sink("out", "out", "p")
    local d = testing.driver(app)
    d:input("names-topic"):pipe("a", "Ann")
    d:input("in"):pipe("a", "1")
    d:input("in"):pipe("b", "1")
    assert.same({ "a=Ann", "b=nil" }, values(d, "out"))
    d:close()
  end)

  it("is described, and refused where it cannot be", function()
    local app = beck.app { id = "g" }
    local t = app:global_table("countries")
    app:stream("orders"):join(t, function(_, v) return v end, function(v) return v end):to("out")
    local plan = app:describe()
    assert.same({ { name = "countries-global", topic = "countries", key_serde = "string",
                    value_serde = "string" } }, plan.globals)
    assert.matches("global table countries%-global <%- countries",
                   require("beck.internal.describe").text(app))

    local a2 = beck.app { id = "g2" }
    local g2 = a2:global_table("t1", { name = "same" })
    local ok, err = pcall(a2.global_table, a2, "t2", { name = "same" })
    assert.is_false(ok)
    assert.matches("40%-dsl_global_spec.lua:%d+: global_store 'same': a store of that name is " ..
                   "already declared at", err)
    ok, err = pcall(a2.global_table, a2, "t1", { name = "other" })
    assert.is_false(ok)
    assert.matches("topic 't1' is read by global store 'same' already", err)
    local s = a2:stream("in")
    ok, err = pcall(s.outer_join, s, g2, function() end, function() end)
    assert.is_false(ok)
    assert.matches("40%-dsl_global_spec.lua:%d+: outer_join: a stream joins a global table " ..
                   "with join or left_join", err)
    ok, err = pcall(s.join, s, g2, "not a function", function() end)
    assert.is_false(ok)
    assert.matches("join: key_selector: expected a function", err)
  end)

  it("whose key selector raises fails the record with where it came from", function()
    local app = beck.app { id = "g" }
    local t = app:global_table("countries")
    app:stream("orders"):join(t, function() error("bad order") end, function(v) return v end)
       :to("out")
    local d = testing.driver(app)
    local ok, err = pcall(d.input(d, "orders").pipe, d:input("orders"), "o1", "x")
    assert.is_false(ok)
    assert.matches("bad order", err)
    assert.matches("orders", err)
    d:close()
  end)
end)
