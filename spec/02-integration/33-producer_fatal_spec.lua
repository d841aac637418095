-- A producer that fails for good (issue 20, docs/reliability.md). librdkafka's
-- idempotent producer takes an out-of-order sequence number from a broker as fatal and never
-- sends again: a real 3-broker cluster coming back from a full outage did that to an outside
-- producer (librdkafka 2.0.2, Debian 12's; fixed in 2.3.0). A stream thread whose delivery
-- fails drops what it did since its last commit and starts its tasks again from that commit
-- with a new producer, as if it alone had crashed: nothing is lost, nothing counted twice,
-- and the node runs on. The dev broker answers one Produce request with that error (ERRORS).
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

-- Lines from..to into partition 0 (led by broker 1, as the control topic): only the outputs
-- of their words reach broker 2, and only beck's stream thread writes them there.
local function lines(from, to, exact)
  local out = {}
  for _, r in ipairs(cluster.bucket_lines(from, to, exact)) do
    out[#out + 1] = { key = r[1], value = r[2], partition = 0 }
  end
  return out
end

describe("a stream thread whose producer fails for good", function()
  after_each(helpers.cleanup)

  if helpers.real_kafka() then
    it("starts again from its last commit", function()
      pending("the fault is injected by the dev broker (ERRORS): on the dev broker only")
    end)
    return
  end

  it("drops the work since its last commit and starts again from it with a new producer",
     function()
    local broker = helpers.start_broker { brokers = 2, topics = { "text-lines:2" } }
    local bs = broker.bootstrap
    -- the record cache off: each count goes to the changelog as it changes, so the changelog
    -- holds the dropped work's writes after its last marker, which the restart must drop
    local n = cluster.start_node(bs, "na", "a", { "--cache-max-bytes", "0" })
    helpers.eventually(function() return #cluster.now_of(n).running == 2 end, 40, 0.2)
    local exact = {}
    helpers.produce(bs, "text-lines", lines(1, 3000, exact), { timeout = 60 })
    helpers.eventually(function() return cluster.committed_total(bs) == 3000 end, 60, 0.3)

    -- broker 2 answers the next Produce request with OUT_OF_ORDER_SEQUENCE_NUMBER (45), 800 ms
    -- late: meanwhile broker 1 takes the interval's changelog records, after the last marker
    assert.is_true(broker:control("ERRORS 2 produce 1 45 800"):match("^OK") ~= nil)
    helpers.produce(bs, "text-lines", lines(3001, 6000, exact), { timeout = 60 })
    local ok, err = pcall(helpers.eventually, function()
      return cluster.committed_total(bs) == 6000
    end, 60, 0.3)
    assert(ok, tostring(err) .. "\n" .. n:log())

    assert(n:alive(), "the node ended: " .. n:log())
    -- its stream thread dropped the interval and opened its tasks again with a new producer
    local redo = n:last_event("redo")
    assert.is_table(redo, n:events_tail())
    assert.is_true(#redo.tasks > 0 and redo.times >= 1, n:events_tail())
    assert.is_true(redo.error:find("failed for good", 1, true) ~= nil or
                   redo.error:find("delivery to", 1, true) ~= nil, redo.error)
    local kv = cluster.latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    local wrong = {}
    for w, c in pairs(exact) do
      if kv[w] ~= c then wrong[#wrong + 1] = string.format("%s=%s (not %d)", w, tostring(kv[w]), c) end
    end
    assert.same({}, wrong)
    assert.equal(0, n:stop())
  end)

  it("has its member take a new producer when the control topic's fails for good", function()
    local broker = helpers.start_broker { brokers = 2, topics = { "text-lines:2" } }
    local bs = broker.bootstrap
    local n = cluster.start_node(bs, "na", "a")
    helpers.eventually(function() return #cluster.now_of(n).running == 2 end, 40, 0.2)
    local exact = {}
    helpers.produce(bs, "text-lines", lines(1, 1000, exact), { timeout = 60 })
    helpers.eventually(function() return cluster.committed_total(bs) == 1000 end, 60, 0.3)

    -- idle: the next Produce request to broker 1 (the control topic's leader) is a heartbeat
    assert.is_true(broker:control("ERRORS 1 produce 1 45"):match("^OK") ~= nil)
    n:wait_event("producer_renewed", { client = "member" }, 30)
    helpers.sleep(3) -- three heartbeats more: the member stays
    helpers.produce(bs, "text-lines", lines(1001, 2000, exact), { timeout = 60 })
    helpers.eventually(function() return cluster.committed_total(bs) == 2000 end, 60, 0.3)
    assert(n:alive(), "the node ended: " .. n:log())
    assert.is_nil(n:last_event("lost"), n:events_tail())
    assert.is_nil(n:last_event("redo"), n:events_tail()) -- the stream thread's was fine
    local kv = cluster.latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, c in pairs(exact) do assert.equal(c, kv[w], w) end
    assert.equal(0, n:stop())
  end)
end)
