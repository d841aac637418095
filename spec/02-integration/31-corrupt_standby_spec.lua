-- A damaged standby store (issue 20, docs/reliability.md#a-damaged-replica): a standby
-- runner reads its replicas back from their files in the background with RocksDB's block
-- checksums checked (engine/dbverify.c). Bytes of an SST file of a replica are overwritten
-- while its node is down; started again, the node finds the damage, removes the replica
-- and builds it anew from its changelog, without stopping, and the replica ends equal to
-- its active's store. RocksDB on disk is what this is about: it runs on the dev broker only.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local function node(bs, id, rack, dir)
  return cluster.start_node(bs, id, rack, cluster.STANDBY, { "--state-dir", dir })
end

-- the replica of `task` ("0_P": wordcount has one subtopology, task P of the app's table)
-- on node `id` applied its changelog to the end (beck status)
local function caught_up(bs, id, task)
  local index = tonumber(task:match("^0_(%d+)$"))
  for _, t in ipairs(cluster.status_json(bs).tasks) do
    if t.task == index then
      for _, p in ipairs(t.progress or {}) do
        if p.node == id and p.lag == 0 and p.offset > 0 then return true end
      end
    end
  end
  return nil, "the replica of " .. task .. " on " .. id .. " is behind"
end

-- largest first: the store's data (the default column family's file holds only the
-- stores' formats, engine/dbformat.h)
local function ssts(dir)
  local out = {}
  local p = io.popen("ls -S " .. dir .. "/*.sst 2>/dev/null")
  for f in p:lines() do out[#out + 1] = f end
  p:close()
  return out
end

describe("a damaged standby store", function()
  after_each(helpers.cleanup)

  if helpers.real_kafka() then
    it("is found and built anew", function()
      pending("RocksDB on disk, not the broker: on the dev broker only")
    end)
    return
  end

  it("is found by the scrub, removed and built anew from its changelog", function()
    local broker = helpers.start_broker { topics = { "text-lines:2" } }
    local bs = broker.bootstrap
    local dirs = { na = helpers.tmpdir(), nb = helpers.tmpdir() }
    local nodes = { na = node(bs, "na", "a", dirs.na), nb = node(bs, "nb", "b", dirs.nb) }
    helpers.eventually(function() return cluster.settled(nodes, 1) end, 40, 0.2)
    local task = cluster.now_of(nodes.nb).standby[1]
    local exact = {}
    helpers.produce(bs, "text-lines", cluster.bucket_lines(1, 3000, exact), { timeout = 60 })
    helpers.eventually(function() return cluster.committed_total(bs) == 3000 end, 60, 0.3)
    helpers.eventually(function() return caught_up(bs, "nb", task) end, 30, 0.5)

    -- a stop and a start: RocksDB writes the replica's WAL into an SST file when it opens
    local tdir = dirs.nb .. "/" .. cluster.APP .. "/" .. task .. "/rocksdb"
    assert.equal(0, nodes.nb:stop())
    if #ssts(tdir) == 0 then
      nodes.nb = node(bs, "nb", "b", dirs.nb)
      helpers.eventually(function() return cluster.settled(nodes, 1) end, 40, 0.2)
      nodes.nb:wait_event("standby_tailing", { task = task, store = "counts" }, 20)
      assert.equal(0, nodes.nb:stop())
    end
    local files = ssts(tdir)
    assert.is_true(#files > 0, "no SST file in " .. tdir)

    -- 256 bytes of the first data block overwritten, as a bad disk or a stray write would
    local f = assert(io.open(files[1], "r+b"))
    local size = f:seek("end")
    assert.is_true(size > 1024, files[1] .. " is " .. size .. " bytes")
    f:seek("set", 64)
    f:write(string.rep("\255", 256))
    f:close()

    local mark = #nodes.na:log()
    nodes.nb = node(bs, "nb", "b", dirs.nb)
    nodes.nb:wait_event("standby_damaged", { task = task, removed = true }, 40)
    -- (log text: the message is the feature, what an operator reads)
    assert.matches("standby " .. task .. ": its store is damaged", nodes.nb:log(), 1, true)
    assert.is_nil(io.open(files[1], "rb"), files[1] .. " is still there")
    helpers.eventually(function() return caught_up(bs, "nb", task) end, 30, 0.5)
    assert.is_true(nodes.nb:alive())
    -- the active went on untouched
    assert.is_nil(nodes.na:log():sub(mark + 1):find("ERROR", 1, true))

    assert.equal(0, nodes.nb:stop())
    assert.equal(0, nodes.na:stop())
    local active, n = cluster.dump(dirs.na, task)
    local replica = cluster.dump(dirs.nb, task)
    assert.is_true(n > 0)
    assert.same(active, replica)
  end)
end)
