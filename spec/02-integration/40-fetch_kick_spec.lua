-- librdkafka 2.0.2 stops fetching while a consumer's queue holds queued.max.messages.kbytes
-- of records and looks again only after a second unless something wakes its broker
-- thread: beck's consumer loops wake it when their queue runs dry with records left
-- (runtime/engine/fetchkick.h). With a 64 KB cap every fetch fills the queue past it, so
-- without the wake-up each of the many fetches 10 MB of input takes would cost a second:
-- the stream thread's reading and a restore's must both take far less.
local helpers = require "spec.helpers"

local N, KEYS, PARTITIONS = 20000, 2000, 8
-- Without the wake-up, 10 MB in 64 KB fetches costs about 160 s (a second a fetch); with it
-- reading and restoring take 1-2 s here, 3-4 s under SAN=1 on a busy host: 10 s stays far
-- below the first and clear of the second.
local BOUND_S = 10
-- small fetches, so that the input takes many (each fills the queue past the cap)
local SMALL = { "-X", "queued.max.messages.kbytes=64", "-X", "max.partition.fetch.bytes=65536",
                "--cache-max-bytes", "0" }

local function args(bs, dir)
  local a = { "-b", bs, "--state-dir", dir }
  for _, x in ipairs(SMALL) do a[#a + 1] = x end
  return a
end

describe("a consumer whose queue is capped far below a second of input", function()
  after_each(helpers.cleanup)

  it("reads and restores at its own pace, not one fetch a second", function()
    helpers.with_timeout(180, function()
      local broker = helpers.start_broker()
      local bs = broker.bootstrap
      assert.is_true(broker:create_topic("fk-in", PARTITIONS))
      assert.is_true(broker:create_topic("fk-out", PARTITIONS))
      local recs, pad = {}, string.rep("x", 500) -- 10 MB: the dev broker keeps 5 MB a partition
      for i = 1, N do recs[i] = { "k" .. (i % KEYS), i .. pad } end
      helpers.produce(bs, "fk-in", recs, { timeout = 60 })

      local node = helpers.start_node("spec/fixtures/fetch_kick.lua", args(bs, helpers.tmpdir()))
      node:wait_event("task", { to = "live" }, 60)
      local t0 = helpers.now()
      helpers.eventually(function()
        assert(node:alive(), "the node died:\n" .. node:log())
        local n = helpers.count(bs, "fk-out")
        return n >= N, n
      end, 60, 0.1)
      local read_s = helpers.now() - t0
      helpers.trace("read %d records of 500 bytes in %.2f s", N, read_s)
      assert(read_s < BOUND_S, string.format("reading took %.2f s", read_s))
      assert.equal(0, node:stop())

      -- a node on an empty disk restores the store's changelog (N records) through the same
      -- capped queue
      local fresh = helpers.start_node("spec/fixtures/fetch_kick.lua", args(bs, helpers.tmpdir()))
      local restore_ms = fresh:wait_event("live", nil, 60).restore_ms
      helpers.trace("restored in %d ms", restore_ms)
      assert(restore_ms < BOUND_S * 1000,
             "restoring took " .. restore_ms .. " ms:\n" .. fresh:log())
      local replayed = 0
      for _, e in ipairs(fresh:events("restore_done")) do replayed = replayed + e.records end
      assert(replayed >= N, "replayed " .. replayed .. " records:\n" .. fresh:log())
      assert.equal(0, fresh:stop())
    end)
  end)
end)
