-- Other clients read beck's output: kcat (librdkafka) and python3-kafka (its own protocol
-- code) both read what scripts/examples/orders_filter.lua wrote, and every key sits in the
-- partition that the Java client's default partitioner (murmur2) gives it, computed by
-- python3-kafka's own murmur2. The input is written to partitions chosen round-robin, not
-- by key, so only beck's partitioner can have put each output key where it is.
local helpers = require "spec.helpers"
local cjson = require "cjson"

local TOPOLOGY = "scripts/examples/orders_filter.lua"
local N, CUSTOMERS, PARTITIONS = 3000, 211, 6

local function murmur2_partitions(keys, n)
  local path = helpers.workdir() .. "/keys.jsonl"
  local lines = {}
  for i, k in ipairs(keys) do lines[i] = cjson.encode(k) end
  helpers.write_file(path, table.concat(lines, "\n") .. "\n")
  local out = assert(helpers.kafka_client({ "murmur2", "-", n }, { stdin = path }))
  local parts = {}
  for p in out:gmatch("%d+") do parts[#parts + 1] = tonumber(p) end
  assert.equal(#keys, #parts)
  return parts
end

describe("outside clients on beck's output (" .. helpers.backend() .. ")", function()
  after_each(helpers.cleanup)

  it("read it with kcat and python3-kafka, each key in its murmur2 partition", function()
    helpers.with_timeout(120, function()
      local broker = helpers.start_broker { topics = { "orders:" .. PARTITIONS } }
      local bs = broker.bootstrap
      local records = {}
      for i = 1, N do
        local c = "customer-" .. ((i * 37) % CUSTOMERS)
        records[i] = { key = "k" .. i, partition = i % PARTITIONS,
                       value = cjson.encode { id = "o" .. i, customer = c, status = "paid",
                                              amount = i } }
      end
      helpers.produce(bs, "orders", records)
      local node = helpers.start_node(TOPOLOGY, { "-b", bs, "--commit-interval-ms", "200" })
      node:wait_running(30)
      helpers.eventually(function() return helpers.count(bs, "paid-orders") == N end, 60, 0.3)
      assert.equal(0, node:stop())

      -- python3-kafka
      local got = helpers.consume(bs, "paid-orders")
      assert.equal(N, #got)
      local keys = {}
      for i, r in ipairs(got) do keys[i] = r.key end
      local want = murmur2_partitions(keys, PARTITIONS)
      local seen = {}
      for i, r in ipairs(got) do
        assert.equal(want[i], r.partition, "key " .. r.key)
        local v = cjson.decode(r.value)
        assert.is_nil(seen[v.order])
        seen[v.order] = r.partition .. " " .. r.key
      end

      -- kcat: the same records in the same places
      local st, out, err = helpers.run({ "kcat", "-b", bs, "-C", "-t", "paid-orders", "-e",
                                         "-q", "-f", "%p %k %s\\n" }, { timeout = 60 })
      assert.equal(0, st, err)
      local n = 0
      for p, k, value in out:gmatch("(%d+) (%S+) ([^\n]+)") do
        n = n + 1
        local v = cjson.decode(value)
        assert.equal(seen[v.order], p .. " " .. k)
      end
      assert.equal(N, n)
    end)
  end)
end)
