-- Stream time as Kafka Streams has it (docs/dsl.md, Stream time): a task that reads two
-- partitions takes the record with the smallest timestamp next, whichever partition the
-- consumer fetched first. The clicks are written before the users they must find, with
-- later timestamps; a left join processed in fetch order gives many clicks no user.
-- spec/fixtures/by_time_join.lua in its own process, on either broker.
local helpers = require "spec.helpers"

local TOPOLOGY = "spec/fixtures/by_time_join.lua"
local PARTITIONS, USERS, CLICKS = 4, 200, 4000
-- an hour ago: a Kafka's retention (7 days by its records' times) keeps them
local BASE = (os.time() - 3600) * 1000

local function inputs()
  local clicks, users = {}, {}
  for i = 1, CLICKS do
    clicks[i] = { key = "u" .. (i % USERS), value = "c" .. i, timestamp = BASE + 100000 + i }
  end
  for j = 0, USERS - 1 do
    users[#users + 1] = { key = "u" .. j, value = "name" .. j, timestamp = BASE + j }
  end
  return clicks, users
end

describe("stream time", function()
  after_each(helpers.cleanup)

  it("joins clicks with the users stamped before them, though written after", function()
    helpers.with_timeout(180, function()
      local broker = helpers.start_broker {
        topics = { "clicks:" .. PARTITIONS, "users:" .. PARTITIONS,
                   "clicks-by-user:" .. PARTITIONS },
      }
      local bs = broker.bootstrap
      local clicks, users = inputs()
      helpers.produce(bs, "clicks", clicks)
      helpers.produce(bs, "users", users)
      local node = helpers.start_node(TOPOLOGY, { "-b", bs })
      node:wait_running(60)
      local out = helpers.eventually(function()
        local got = helpers.consume(bs, "clicks-by-user")
        return #got >= CLICKS and got, #got .. " of " .. CLICKS .. " outputs"
      end, 120, 0.5)
      assert.equal(CLICKS, #out)
      local alone, at = 0, {}
      for _, r in ipairs(out) do
        local click, user = r.value:match("^(c%d+)|(.*)$")
        assert(click, "unexpected output " .. r.value)
        if user ~= "name" .. r.key:sub(2) then alone = alone + 1 end
        at[click] = r.timestamp
      end
      assert.equal(0, alone, alone .. " click(s) processed before their user")
      -- a stream-table join's result carries the stream record's time
      for _, c in ipairs(clicks) do assert.equal(c.timestamp, at[c.value]) end
      -- then live: the users' partitions are at their end, so a click waits for nothing
      local more = {}
      for i = 1, 100 do
        more[i] = { key = "u" .. (i % USERS), value = "live" .. i }
      end
      local t0 = helpers.now()
      helpers.produce(bs, "clicks", more)
      helpers.eventually(function()
        local got = helpers.consume(bs, "clicks-by-user")
        return #got >= CLICKS + 100, #got .. " of " .. (CLICKS + 100) .. " outputs"
      end, 30, 0.2)
      assert.is_true(helpers.now() - t0 < 15, "live clicks took " .. (helpers.now() - t0) .. " s")
      assert.equal(0, node:stop())
    end)
  end)

  -- A task's stream time goes with its commits (the input offsets' metadata), as Kafka
  -- Streams' partition time does: opened again, here by a node with an empty state
  -- directory that restores from the changelog, it drops a record as late that was late
  -- before the stop, and emits no window twice. (It started from nothing before: the late
  -- record made its expired window anew, and emit final sent that window a second time.)
  it("goes on after a restart from the stream time its last commit says", function()
    helpers.with_timeout(180, function()
      local broker = helpers.start_broker { topics = { "window-in:1", "window-counts:1" } }
      local bs = broker.bootstrap
      local W = 1000 -- the fixture's tumbling windows; BASE is a multiple of it
      local env = { WINDOW_EMIT = "final" }
      local function node()
        local n = helpers.start_node("spec/fixtures/window_count.lua",
                                     { "-b", bs, "--endpoint", "127.0.0.1:0" }, { env = env })
        n:wait_running(60)
        return n
      end
      local function outputs(n)
        return helpers.eventually(function()
          local got = helpers.consume(bs, "window-counts", { timeout = 5 })
          return #got >= n and got, #got .. " of " .. n .. " outputs"
        end, 60, 0.5)
      end
      local first = node()
      helpers.produce(bs, "window-in", {
        { key = "a", value = "1", timestamp = BASE },
        { key = "a", value = "2", timestamp = BASE + 500 },
        { key = "b", value = "3", timestamp = BASE + 900 },
        { key = "a", value = "4", timestamp = BASE + 1500 }, -- closes [BASE, BASE + W)
      })
      local got = outputs(2)
      assert.same({ { "a@" .. BASE, "2" }, { "b@" .. BASE, "1" } }, helpers.kvs(got))
      assert.equal(BASE + 500, got[1].timestamp) -- the window's newest record's
      assert.equal(0, first:stop())
      local second = node()
      helpers.produce(bs, "window-in", {
        { key = "a", value = "5", timestamp = BASE + 100 },      -- late since BASE + 1500
        { key = "a", value = "6", timestamp = BASE + 2 * W + 600 }, -- closes [BASE + W, ...)
      })
      got = outputs(3)
      helpers.sleep(1) -- (a second emission of the first window would come with the third)
      got = helpers.consume(bs, "window-counts", { timeout = 5 })
      assert.same({ { "a@" .. BASE, "2" }, { "b@" .. BASE, "1" }, { "a@" .. (BASE + W), "1" } },
                  helpers.kvs(got))
      -- (log text: the message is the feature, what an operator or a user reads)
      second:wait_log("dropped a late record %(timestamp " .. (BASE + 100), 30)
      -- and /metrics counts it, by task and store
      local url = second:query_url()
      local st, out, err = helpers.run({ "/usr/bin/python3", "spec/fixtures/query_client.py",
                                         "status", url, "/metrics" }, { name = "metrics" })
      assert.equal(0, st, err)
      local body = assert(require("cjson").decode(out).body)
      assert.matches('beck_task_late_records_total{app="window%-count",node="[^"]*",' ..
                     'task="0_0",store="count%-1%-store"} 1\n', body)
      assert.equal(0, second:stop())
    end)
  end)
end)
