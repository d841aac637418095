-- Versioned tables (docs/dsl.md, "Versioned tables"): spec/fixtures/versioned_join.lua joins
-- orders with a price table kept with 60 s of history. Prices come out of order, orders come
-- late: each order gets the price valid at its own time; an order older than every price,
-- or after a deletion, gets none. The query API reads a key's latest version and as of a
-- time (?as_of=T), also after a restart.
local helpers = require "spec.helpers"


local http = helpers.http_get

describe("a versioned table", function()
  after_each(helpers.cleanup)

  it("joins each record with the version valid at its time, and answers as of a time",
     function()
    helpers.with_timeout(180, function()
      local broker = helpers.start_broker { topics = { "versioned-prices:2",
                                                       "versioned-orders:2",
                                                       "versioned-out:2" } }
      local bs = broker.bootstrap
      local state = helpers.tmpdir()
      local T = (os.time() - 600) * 1000 -- recent: Kafka's retention keeps the records
      local function start()
        local node = helpers.start_node("spec/fixtures/versioned_join.lua",
                                        { "-b", bs, "--state-dir", state,
                                          "--commit-interval-ms", "100",
                                          "--endpoint", "127.0.0.1:0" }, { name = "v" })
        node:wait_running(60)
        local url = node:query_url(20)
        return node, url
      end
      local node, url = start()
      -- prices of a: 10 at T+1000, 30 at T+3000, then 20 at T+2000 (out of order);
      -- b: 5 at T+1000, deleted at T+4000
      helpers.produce(bs, "versioned-prices", {
        { key = "a", value = "10", timestamp = T + 1000 },
        { key = "a", value = "30", timestamp = T + 3000 },
        { key = "a", value = "20", timestamp = T + 2000 },
        { key = "b", value = "5", timestamp = T + 1000 },
        { key = "b", value = nil, timestamp = T + 4000 },
      })
      helpers.eventually(function()
        local st, body = http(url, "/v1/stores/prices/keys/a")
        return st == 200 and body.value == "30", tostring(st)
      end, 30, 0.2)
      helpers.produce(bs, "versioned-orders", {
        { key = "a", value = "o1", timestamp = T + 1500 },
        { key = "a", value = "o2", timestamp = T + 2500 },
        { key = "a", value = "o3", timestamp = T + 3500 },
        { key = "a", value = "o0", timestamp = T + 500 },
        { key = "b", value = "o4", timestamp = T + 2000 },
        { key = "b", value = "o5", timestamp = T + 4500 },
      })
      local got = helpers.eventually(function()
        local out = {}
        for _, r in ipairs(helpers.consume(bs, "versioned-out", { timeout = 10 })) do
          out[r.value:match("^(o%d)")] = r.value
        end
        local n = 0
        for _ in pairs(out) do n = n + 1 end
        return n == 6 and out, n .. " of 6 out"
      end, 60, 0.3)
      assert.same({ o0 = "o0@nil", o1 = "o1@10", o2 = "o2@20", o3 = "o3@30", o4 = "o4@5",
                    o5 = "o5@nil" }, got)

      local function check()
        local st, body = http(url, "/v1/stores/prices/keys/a")
        assert.equal(200, st)
        assert.equal("30", body.value)
        assert.equal(T + 3000, body.timestamp)
        st, body = http(url, "/v1/stores/prices/keys/a?as_of=" .. (T + 2999))
        assert.equal(200, st)
        assert.equal("20", body.value)
        assert.equal(T + 2000, body.timestamp)
        st, body = http(url, "/v1/stores/prices/keys/a?as_of=" .. (T + 1000))
        assert.equal("10", body.value)
        st = http(url, "/v1/stores/prices/keys/a?as_of=" .. (T + 999))
        assert.equal(404, st)
        st, body = http(url, "/v1/stores/prices/keys/b")
        assert.equal(404, st)
        assert.equal(T + 4000, body.deleted_at)
        st, body = http(url, "/v1/stores/prices/keys/b?as_of=" .. (T + 3999))
        assert.equal("5", body.value)
        st = http(url, "/v1/stores/prices/keys/a?as_of=soon")
        assert.equal(400, st)
      end
      check()
      local _, list = http(url, "/v1/stores")
      assert.equal("versioned", list.stores[1].kind)
      assert.equal(0, node:stop(), node:log():sub(-2000))
      node, url = start()
      check()
      assert.equal(0, node:stop(), node:log():sub(-2000))
    end)
  end)
end)
