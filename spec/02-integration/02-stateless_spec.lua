-- A stateless topology end to end: 50,000 orders (30,000 on Kafka) through
-- scripts/examples/orders_filter.lua on a 3-broker dev cluster, written and
-- read by an outside client (python3-kafka), checked record by record.
local helpers = require "spec.helpers"
local cjson = require "cjson"

local TOPOLOGY = "scripts/examples/orders_filter.lua"
-- (fewer on Kafka, whose outside client writes and reads them at a fraction of the dev
-- broker's rate: the suite's 20 minutes)
local N, CUSTOMERS, PARTITIONS = helpers.real_kafka() and 30000 or 50000, 997, 8
local STATUSES = { "paid", "new", "paid", "cancelled", "paid", "refunded", "paid" }

-- The input, and what orders_filter must make of it: order id -> expected
-- output, and order id -> (customer, sequence number of the customer's order).
local function make_orders()
  local records, expected, seq_of, nexpected = {}, {}, {}, 0
  local seq = {}
  for i = 1, N do
    local c = "c" .. ((i * 7919) % CUSTOMERS)
    seq[c] = (seq[c] or 0) + 1
    local id = "o" .. i
    local items
    if i % 11 ~= 0 then
      items = {}
      for j = 1, i % 5 do items[j] = { sku = "s" .. j, qty = j } end
    end
    local order = { id = id, status = STATUSES[i % #STATUSES + 1], amount = (i % 10000) / 4,
                    seq = seq[c], items = items }
    -- the customer field is optional: the record's key stands in for it
    if i % 13 ~= 0 then order.customer = c end
    records[i] = { key = c, value = cjson.encode(order) }
    seq_of[id] = { c, seq[c] }
    if order.status == "paid" then
      nexpected = nexpected + 1
      expected[id] = { key = c, amount = order.amount,
                       items = type(items) == "table" and #items or 0 }
    end
  end
  return records, expected, seq_of, nexpected
end

local function check_output(got, expected, seq_of, nexpected)
  assert.equal(nexpected, #got)
  local seen, last_seq, partition_of = {}, {}, {}
  for _, r in ipairs(got) do -- ordered by partition, then offset
    local v = cjson.decode(r.value)
    local want = expected[v.order]
    assert(want, "unexpected output record " .. r.value)
    assert(not seen[v.order], "order " .. v.order .. " arrived twice")
    seen[v.order] = true
    assert.equal(want.key, r.key)
    assert.same({ order = v.order, amount = want.amount, items = want.items }, v)
    -- per key: one partition, and the customer's orders in the order written
    local c, s = seq_of[v.order][1], seq_of[v.order][2]
    partition_of[c] = partition_of[c] or r.partition
    assert(partition_of[c] == r.partition, "key " .. c .. " is in two partitions")
    assert(s > (last_seq[c] or 0), string.format("key %s: order %s (seq %d) after seq %d", c,
                                                 v.order, s, last_seq[c] or 0))
    last_seq[c] = s
  end
  -- nothing is missing either (counts agree and there are no duplicates)
  for id in pairs(expected) do assert(seen[id], "order " .. id .. " missing") end
end

describe("orders_filter on a 3-broker dev cluster", function()
  local records, expected, seq_of, nexpected

  setup(function()
    records, expected, seq_of, nexpected = make_orders()
  end)

  after_each(helpers.cleanup)

  -- A 3-broker cluster with the orders written. (An earlier version wrote the input once
  -- more on a fresh cluster when python3-kafka's producer expired a batch: the mock cluster
  -- then lost wake-ups and stalled a second per leader change. The dev broker's kicker
  -- fixed that; a failure to write the input now fails the spec, with the client's error.)
  local function cluster_with_orders()
    local broker = helpers.start_broker { brokers = 3 }
    assert.is_true(broker:create_topic("orders", PARTITIONS))
    helpers.trace("broker up")
    helpers.produce(broker.bootstrap, "orders", records, { timeout = 60 })
    helpers.trace("produced")
    return broker
  end

  -- extra: more `beck run` arguments
  local function run_case(extra)
    helpers.with_timeout(120, function()
      local broker = cluster_with_orders()
      local bs = broker.bootstrap
      assert.equal(N, (helpers.count(bs, "orders")))

      local args = { "-b", bs }
      for _, a in ipairs(extra) do args[#args + 1] = a end
      local threads = tonumber(extra[1] == "--threads" and extra[2] or 1)
      local node = helpers.start_node(TOPOLOGY, args)
      helpers.trace("node started")
      node:wait_event("started", { app = "orders-filter", tasks = 8, threads = threads })

      helpers.eventually(function()
        local n = helpers.count(bs, "paid-orders")
        assert(node:alive(), "the node died:\n" .. node:log())
        return n >= nexpected, n .. " of " .. nexpected
      end, 40, 0.5)
      helpers.trace("all output counted")
      -- the sink was created with the source's partition count
      local _, ends = helpers.count(bs, "paid-orders")
      local parts = 0
      for _ in pairs(ends) do parts = parts + 1 end
      assert.equal(PARTITIONS, parts)

      check_output(helpers.consume(bs, "paid-orders", { timeout = 30 }), expected, seq_of,
                   nexpected)

      helpers.trace("output checked")
      assert.equal(0, node:stop())
      helpers.trace("node stopped")
      local log = node:log()
      -- what the node logged after the signal line itself
      local after = log:match("signal 15:[^\n]*\n(.*)$")
      assert.truthy(after, "no sign of SIGTERM in the log:\n" .. log)
      assert.matches("app orders%-filter stopped: " .. N .. " in, " .. nexpected .. " out, " ..
                     "0 skipped, 0 dead%-lettered", after)
      assert.not_matches("ERROR", log)
      -- every input offset is committed: a restart would not read anything again.
      -- With a commit interval longer than the run, only the commit on
      -- SIGTERM can have done it.
      local committed = helpers.committed(bs, "orders", "orders-filter")
      local _, in_ends = helpers.count(bs, "orders")
      assert.same(in_ends, committed)
      -- and the log says so: a line after the signal reports the final commit
      assert.matches("[Cc]ommit", after, 1, "no commit logged after SIGTERM:\n" .. after)
    end)
  end

  it(string.format("filters and reshapes %d orders, in order per key, on one thread", N),
     function()
    run_case {}
  end)

  it("does the same on two threads, committing everything on SIGTERM", function()
    run_case { "--threads", "2", "--commit-interval-ms", "600000" }
  end)
end)
