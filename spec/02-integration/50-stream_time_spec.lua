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
end)
