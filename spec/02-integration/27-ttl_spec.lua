-- A store with a time to live on a cluster (docs/state.md, TTL): spec/fixtures/ttl_count.lua
-- counts by key in a store whose values live 10 s of record time. Two nodes, each its own
-- process, one standby of the task. Keys written at T0 expire once a record at T0 + 12 s has
-- moved the stream time: the active's sweep tombstones them in the changelog (read from
-- outside), reads through either node (the active's, and the standby's with --replica-any)
-- no longer find them while keys written at T0 + 5 s are still there; after the active is
-- killed with SIGKILL, the promoted standby counts an expired key from 1 and a live one on.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local cjson = require "cjson.safe"

local APP = "ttlcount"
local CHANGELOG = "ttlcount-counts-changelog"

local function start(bs, id, rack)
  local argv = { "-b", bs, "--cluster", "1", "--node-id", id, "--rack", rack,
                 "--commit-interval-ms", "300", "--endpoint", "127.0.0.1:0" }
  for _, a in ipairs(cluster.STANDBY) do argv[#argv + 1] = a end
  return helpers.start_node("spec/fixtures/ttl_count.lua", argv, { name = id })
end

-- `beck get` of key through node `via`: its JSON answer, or nil when the key is not there.
local function get(bs, via, key, any)
  local argv = { helpers.beck_bin(), "get", "-b", bs, "--app", APP, "--node", via }
  if any then argv[#argv + 1] = "--replica-any" end
  argv[#argv + 1] = "counts"
  argv[#argv + 1] = key
  local st, out, err = helpers.run(argv, { name = "get", timeout = 30 })
  if st == 1 then return nil end
  assert.equal(0, st, "beck get " .. key .. " via " .. via .. ": " .. err)
  return assert(cjson.decode(out), out)
end

describe("a store with a time to live", function()
  after_each(helpers.cleanup)

  it("expires keys in the store, its changelog and its standby, and after a failover",
     function()
    local broker = helpers.start_broker { topics = { "ttl-in:1", "ttl-out:1" } }
    local bs = broker.bootstrap
    local nodes = { na = start(bs, "na", "a"), nb = start(bs, "nb", "b") }
    local active, standby
    helpers.eventually(function()
      for id, n in pairs(nodes) do
        local e = cluster.now_of(n)
        if #e.running == 1 then active = id elseif #e.standby == 1 then standby = id end
      end
      return active and standby
    end, 40, 0.2)

    local t0 = os.time() * 1000 - 600000
    local records = {}
    for i = 1, 50 do records[#records + 1] = { key = "a" .. i, value = "x", timestamp = t0 } end
    for i = 1, 50 do
      records[#records + 1] = { key = "b" .. i, value = "x", timestamp = t0 + 5000 }
    end
    records[#records + 1] = { key = "z", value = "x", timestamp = t0 + 12000 }
    helpers.produce(bs, "ttl-in", records, { timeout = 60 })

    -- the a keys tombstoned in the changelog by the active's sweep, the b keys not
    helpers.eventually(function()
      local gone = 0
      for _, r in ipairs(helpers.consume(bs, CHANGELOG, { timeout = 30 })) do
        if r.key:match("^a%d+$") and r.value == nil then gone = gone + 1 end
        assert.is_false(r.key:match("^b%d+$") ~= nil and r.value == nil, "tombstone of " .. r.key)
      end
      return gone == 50, gone .. " tombstones"
    end, 30, 0.3)

    -- no node finds an a key; both find the b keys, the standby too
    assert.is_nil(get(bs, active, "a7"))
    assert.equal("1", get(bs, active, "b7").value)
    helpers.eventually(function()
      local b = get(bs, standby, "b7", true)
      return b and b.role == "standby" and b.value == "1" and get(bs, standby, "a7", true) == nil
    end, 20, 0.3)

    -- the active dies; the standby takes over with the same state: a7 starts again, b7 goes on
    nodes[active]:kill()
    helpers.produce(bs, "ttl-in", { { key = "a7", value = "x", timestamp = t0 + 12001 },
                                    { key = "b7", value = "x", timestamp = t0 + 12002 } })
    helpers.eventually(function()
      local kv = cluster.latest(helpers.consume(bs, "ttl-out", { timeout = 30 }))
      return kv.a7 == 1 and kv.b7 == 2, cjson.encode { a7 = kv.a7, b7 = kv.b7 }
    end, 40, 0.3)
    assert.equal(0, nodes[standby]:stop())
  end)
end)
