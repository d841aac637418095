-- Bounded changelogs over minutes (docs/state.md, Bounded changelogs), on a real Apache
-- Kafka: two apps count the same stream by key side by side on one broker, every record a
-- new key (a rotating key space, which compaction cannot shrink), for BECK_SPEC_LONG_S
-- seconds (default 180):
--   ret-bounded  --changelog-retention-ms 20000, archived every 5 s
--   ret-compact  the default compacted changelog
-- Every 10 s the spec measures each changelog partition's directory on the broker's disk
-- (blocks in use). The compacted one grows with the input; the bounded one stops growing
-- once its first retention has passed and stays under what 80 s of input takes (~45 s
-- measured), while
-- the archive keeps its newest snapshots. Both apps count every record.
-- spec/04-long runs alongside the other runs of `make test` (scripts/test): it waits more
-- than it works.
local helpers = require "spec.helpers"

local TOPOLOGY = "scripts/bench/retention.lua"
local RATE = 1000
local RETENTION_MS = 20000

local function du(path)
  local st, out = helpers.run { "du", "-s", "--block-size=1", path }
  return st == 0 and tonumber(out:match("^(%d+)")) or 0
end

local function manifests(dir)
  local p = io.popen("ls '" .. dir .. "' 2>/dev/null | grep -c manifest")
  local n = tonumber(p:read("*l")) or 0
  p:close()
  return n
end

describe("a bounded changelog", function()
  after_each(helpers.cleanup)

  it("stays bounded on the broker's disk for minutes while a compacted one grows", function()
    if not helpers.real_kafka() then
      pending("needs BECK_SPEC_BACKEND=kafka: the dev broker deletes nothing by retention")
      return
    end
    local seconds = tonumber(os.getenv("BECK_SPEC_LONG_S") or "180")
    local broker = helpers.start_broker { topics = { "ret-in:1" } }
    local bs, archive = broker.bootstrap, helpers.tmpdir()
    local common = { "-b", bs, "--commit-interval-ms", "1000" }
    local function node(id, extra)
      local args = { "--id", id }
      for _, a in ipairs(common) do args[#args + 1] = a end
      for _, a in ipairs(extra) do args[#args + 1] = a end
      return helpers.start_node(TOPOLOGY, args, { name = id })
    end
    local bounded = node("ret-bounded", { "--changelog-retention-ms", tostring(RETENTION_MS),
                                          "--snapshot-archive", archive,
                                          "--snapshot-archive-interval-ms", "5000" })
    local compact = node("ret-compact", {})
    helpers.eventually(function()
      return bounded:last_event("started", { tasks = 1 }) and compact:last_event("started", { tasks = 1 })
    end, 60, 0.2)

    local total = RATE * seconds
    local feeder = helpers.spawn({ "/usr/bin/python3", "spec/fixtures/kafka_client.py", "steady",
                                   bs, "ret-in", RATE, seconds, 1, total + 1,
                                   "--timeout", seconds + 60 }, { name = "steady" })
    local data = broker.dir .. "/broker-1/data/"
    local samples = { bounded = {}, compact = {} }
    local t0 = helpers.now()
    while feeder:alive() do
      helpers.sleep(10)
      local t = helpers.now() - t0
      local b, c = du(data .. "ret-bounded-counts-changelog-0"),
                   du(data .. "ret-compact-counts-changelog-0")
      samples.bounded[#samples.bounded + 1] = { t, b }
      samples.compact[#samples.compact + 1] = { t, c }
      helpers.trace("t=%.0f s bounded %d compact %d", t, b, c)
    end
    assert.equal(0, feeder:wait(30), feeder:log())
    -- both apps counted every record
    for _, id in ipairs { "ret-bounded", "ret-compact" } do
      helpers.eventually(function()
        local o = helpers.committed(bs, "ret-in", id)[0] or 0
        return o == total, id .. " committed " .. o .. " of " .. total
      end, 60, 0.5)
    end

    local function show(list)
      local parts = {}
      for _, s in ipairs(list) do parts[#parts + 1] = string.format("%.0f:%d", s[1], s[2]) end
      return table.concat(parts, " ")
    end
    local why = "bounded " .. show(samples.bounded) .. "; compact " .. show(samples.compact)
    local cend = samples.compact[#samples.compact][2]
    local bend = samples.bounded[#samples.bounded][2]
    -- what one second of input takes in a changelog that keeps everything
    local per_s = cend / samples.compact[#samples.compact][1]
    local bmax = 0
    for _, s in ipairs(samples.bounded) do
      -- a segment lives a retention, then is deleted within one more (segment.ms = the
      -- retention, deletion checked every second): bounded from 2.5 retentions on
      if s[1] >= 2.5 * RETENTION_MS / 1000 and s[2] > bmax then bmax = s[2] end
    end
    assert.is_true(per_s > 0, why)
    assert.is_true(bmax > 0, why)
    -- a segment holds up to a retention and goes a retention after its last record: about
    -- 40 s of input at most, 45 s measured; 80 s leaves room for a broker that deletes late
    -- on a loaded machine (one run, alongside the whole suite, held one segment 20 s longer)
    assert.is_true(bmax <= per_s * 80, string.format(
      "the bounded changelog took %d bytes, more than 80 s of input (%.0f bytes/s): %s",
      bmax, per_s, why))
    -- the compacted one grew all along; at the end it holds several times the bounded one
    local half = samples.compact[math.floor(#samples.compact / 2)][2]
    assert.is_true(cend > half * 1.5, "the compacted changelog stopped growing: " .. why)
    assert.is_true(cend >= 2 * bend, "compacted only " .. cend / bend .. " times the bounded: " ..
                   why)
    -- the archive holds the bounded app's newest snapshots, and nothing of the other
    local kept = manifests(archive .. "/ret-bounded/0_0")
    assert.is_true(kept >= 1 and kept <= 3, kept .. " archived snapshots")
    assert.equal(0, manifests(archive .. "/ret-compact/0_0"))
    print(string.format("\n  changelog bytes at %d s: bounded %d (at most %d after %.0f s), " ..
                        "compacted %d (%.1f times); %d archived snapshot(s) kept",
                        seconds, bend, bmax, 2.5 * RETENTION_MS / 1000, cend, cend / bend, kept))
  end)
end)
