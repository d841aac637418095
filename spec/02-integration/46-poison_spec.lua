-- A poison record in a cluster (docs/reliability.md, Poison records): under on_error=fail the
-- record's task is parked where it fails, and only that task stops. The node keeps its other
-- tasks, the cluster keeps its nodes: when the node holding the parked task stops, the task
-- moves and is parked again on the next one, which stays up too. `beck skip` then lists the
-- record and the task goes on by itself, with every other record processed exactly once.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local BECK = helpers.beck_bin()
local TOPOLOGY = "spec/fixtures/boom.lua"
local PARTS, BAD_PART = 4, 2

local function start(bs, id)
  return helpers.start_node(TOPOLOGY, { "-b", bs, "--cluster", "1", "--node-id", id,
                                        "--heartbeat-interval-ms", "200",
                                        "--session-timeout-ms", "2000",
                                        "--commit-interval-ms", "300" }, { name = id })
end

-- The records a node parked its task on (its "parked" events).
local function failures(node)
  return #node:events("parked", { topic = "boom-in" })
end

describe("a poison record in a cluster", function()
  after_each(helpers.cleanup)

  it("parks its task only, on one node at a time, and beck skip moves the app past it",
     function()
    local broker = helpers.start_broker { topics = { "boom-in:" .. PARTS } }
    local bs = broker.bootstrap
    local na, nb = start(bs, "na"), start(bs, "nb")
    helpers.eventually(function()
      return cluster.running(na) == 2 and cluster.running(nb) == 2
    end, 60, 0.2)
    -- 100 records per partition; the poison is the 41st of partition BAD_PART
    local records, want = {}, {}
    for p = 0, PARTS - 1 do
      for i = 0, 99 do
        local v = string.format("v%d-%d", p, i)
        if p == BAD_PART and i == 40 then v = "boom " .. v end
        records[#records + 1] = { key = "k" .. i, value = v, partition = p }
        if not v:match("^boom") then want[v .. "!"] = true end
      end
    end
    helpers.produce(bs, "boom-in", records)
    local nwant = 0
    for _ in pairs(want) do nwant = nwant + 1 end

    -- one failure, on the node that runs the task; every other partition done; both up
    local holder, other
    helpers.eventually(function()
      if failures(na) > 0 then holder, other = na, nb end
      if failures(nb) > 0 then holder, other = nb, na end
      return holder
    end, 30, 0.2)
    helpers.eventually(function()
      local c = helpers.committed(bs, "boom-in", "boom")
      for p = 0, PARTS - 1 do
        if (c[p] or 0) ~= (p == BAD_PART and 40 or 100) then return nil end
      end
      return true
    end, 30, 0.3)
    assert.is_true(na:alive() and nb:alive())
    assert.equal(1, failures(na) + failures(nb))
    local parked = holder:last_event("parked")
    assert.same({ BAD_PART, 40 }, { parked.partition, parked.offset })
    -- (log text: the command the operator is told to run is the feature)
    assert.matches("beck skip %-b [^ ]+ %-%-app boom %-%-topic boom%-in %-%-partition " ..
                   BAD_PART .. " %-%-offset 40", holder:log())

    -- the holder stops: the task moves, meets the record again, is parked there; no node dies
    assert.equal(0, holder:stop())
    helpers.eventually(function() return failures(other) > 0 end, 30, 0.2)
    helpers.sleep(1)
    assert.is_true(other:alive(), other:log())
    assert.equal(40, helpers.committed(bs, "boom-in", "boom")[BAD_PART])

    -- beck skip: the parked task goes on, past that record only
    local st, out, err = helpers.run({ BECK, "skip", "-b", bs, "--app", "boom", "--topic",
                                       "boom-in", "--partition", tostring(BAD_PART), "--offset",
                                       "40", "--to-dlq", "--reason", "not a value" },
                                     { timeout = 60 })
    assert.equal(0, st, err)
    assert.matches("boom%-dlq", out)
    helpers.eventually(function()
      return helpers.committed(bs, "boom-in", "boom")[BAD_PART] == 100
    end, 30, 0.3)
    assert.is_table(other:last_event("skipped", { topic = "boom-in", partition = BAD_PART,
                                                  offset = 40 }), other:events_tail())
    assert.equal(0, other:stop())

    -- every good record once: nothing lost, nothing repeated
    local seen, dups = {}, 0
    for _, r in ipairs(helpers.consume(bs, "boom-out")) do
      if seen[r.value] then dups = dups + 1 end
      seen[r.value] = true
    end
    local missing = 0
    for v in pairs(want) do
      if not seen[v] then missing = missing + 1 end
    end
    assert.equal(0, missing)
    assert.equal(0, dups)
    -- the dead letter: the record as it was, with where it came from and why
    local dlq = helpers.consume(bs, "boom-dlq")
    assert.equal(1, #dlq)
    assert.equal("boom v2-40", dlq[1].value)
    assert.equal("not a value", dlq[1].headers["beck.error"])
    assert.equal(tostring(BAD_PART), dlq[1].headers["beck.partition"])
    assert.equal("40", dlq[1].headers["beck.offset"])
    print(string.format("\n  %d good records, each once; the poison parked on two nodes in "
                        .. "turn, none stopped", nwant))
  end)
end)
