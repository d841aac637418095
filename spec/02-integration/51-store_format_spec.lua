-- A store whose settings change its bytes on disk (docs/state.md, Store formats): the count
-- of spec/fixtures/format_count.lua run without a time to live, then with one over the same
-- state directory, then without again. Each start finds the store written in the other
-- layout: it says so, drops its local data and replays the changelog, and the counts go on
-- exactly. (Before, the values were read with the other layout: 8 bytes cut off, or 8 bytes
-- of time in front of the number.)
local helpers = require "spec.helpers"

describe("a store whose ttl setting changed", function()
  after_each(helpers.cleanup)

  it("is rebuilt from its changelog, not misread", function()
    helpers.with_timeout(180, function()
      local broker = helpers.start_broker { topics = { "ttl-in:1", "ttl-out:1" } }
      local bs = broker.bootstrap
      local state = helpers.tmpdir()
      local now = os.time() * 1000
      local sent = 0
      local function round(ttl, expect_log)
        local node = helpers.start_node("spec/fixtures/format_count.lua",
                                        { "-b", bs, "--state-dir", state,
                                          "--commit-interval-ms", "200" },
                                        { env = { TTL_COUNT_TTL_MS = ttl } })
        node:wait_running(60)
        if expect_log then
          assert.matches('store counts was written as "' .. expect_log[1] .. '" and its ' ..
                         'settings now make it "' .. expect_log[2] .. '"', node:log(), 1, true)
        end
        local recs = {}
        for i = 1, 20 do recs[i] = { key = "k" .. (i % 4), value = "x", timestamp = now + sent } end
        sent = sent + 20
        helpers.produce(bs, "ttl-in", recs)
        local out = helpers.eventually(function()
          local got = helpers.consume(bs, "ttl-out", { timeout = 5 })
          return #got >= sent and got, #got .. " of " .. sent
        end, 60, 0.3)
        assert.equal(0, node:stop(), node:log():sub(-2000))
        return out
      end
      round("none")
      round("600000", { "kv", "kv-ttl" })
      local out = round("none", { "kv-ttl", "kv" })
      local last = {}
      for _, r in ipairs(out) do last[r.key] = r.value end
      -- 60 records over 4 keys, each counted 15 times, across the three layouts
      assert.same({ k0 = "15", k1 = "15", k2 = "15", k3 = "15" }, last)
    end)
  end)
end)
