-- A changelog gap (runtime/replica/standby.c boot_reason, runtime/replica/bootstrap.c): a standby replica
-- whose checkpoint is older than the first record its changelog still holds cannot be
-- rebuilt by replaying it. With cold bootstrap on (--ssh-key) the node must build it from the
-- active's snapshot instead; without, it says how many updates are lost to the replica.
--
-- Real processes: a dev broker (it keeps about 5 MiB per partition and drops the oldest
-- batches silently: the changelog's start offset moves) or a real Apache Kafka (the
-- changelog is made compact,delete with a retention of 4 s and a segment a second before
-- beck starts: the broker deletes its head, as a bounded changelog's would be), an OpenSSH
-- sshd on 127.0.0.1, and
-- two `beck run --cluster 1` nodes of wordcount, na (rack a) and nb (rack b), one standby
-- per task, one task (text-lines has one partition), --bootstrap-min-records 0 so that only
-- a gap makes a replica bootstrap, and no write-back cache so that every word is one
-- changelog record. nb's replica catches up and nb stops (its replica checkpointed). Then
-- long words go through na: first a chunk with 500 words seen nowhere else, then chunks of
-- the common words until the changelog's start has moved past that first chunk, so those
-- 500 words' only updates are gone from it. nb restarts on its state directory:
--   with --ssh-key  its log says "cold bootstrap: changelog ... starts at offset X but the
--                   store needs Y", then "installed snapshot", never "update(s) are lost";
--                   its store equals na's key by key (the 500 words too) and every count is
--                   exact;
--   without         (the control: the gap really happened) its log says "... update(s) are
--                   lost to this replica", and its store lacks the 500 words.
local helpers = require "spec.helpers"
local sshd_fixture = require "spec.fixtures.sshd"
local cluster = require "spec.fixtures.cluster"

local APP = cluster.APP
local TASK = "0_0"
local CHANGELOG = "wordcount-counts-changelog"
local COMMON, EARLY = 2000, 500 -- words
local PAD = string.rep("z", 150) -- long words: fewer records fill the broker's 5 MiB
local PER_LINE = 20

local spell = cluster.spell

-- Common word i is "k<i spelled>zzz...", early word i "e<i spelled>zzz..." (letters only:
-- wordcount counts %a+ runs).
local function common(i) return "k" .. spell(i) .. PAD end
local function early(i) return "e" .. spell(i) .. PAD end

-- Lines of PER_LINE words of `word`(i % n) for i in first .. last, counted into exact.
local function lines_of(word, n, first, last, exact, out)
  out = out or {}
  local ws = {}
  for i = first, last do
    local w = word(i % n)
    ws[#ws + 1] = w
    exact[w] = (exact[w] or 0) + 1
    if #ws == PER_LINE or i == last then
      out[#out + 1] = { "l" .. #out, table.concat(ws, " ") }
      ws = {}
    end
  end
  return out
end

local plain = cluster.plain

-- The changelog partition's start and end offsets, asked of the broker by the outside client
-- (python3-kafka's ListOffsets).
local PY_OFFSETS = [[
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1].split(","), api_version=(2, 5, 0),
                  request_timeout_ms=20000)
tp = TopicPartition(sys.argv[2], 0)
print(c.beginning_offsets([tp])[tp], c.end_offsets([tp])[tp])
c.close()
]]
local function offsets(bs, topic)
  local st, out, err = helpers.run({ "/usr/bin/python3", "-c", PY_OFFSETS, bs, topic },
                                   { name = "offsets", timeout = 30 })
  assert(st == 0, "offsets of " .. topic .. ": " .. err)
  local lo, hi = out:match("^(%d+) (%d+)")
  return assert(tonumber(lo)), assert(tonumber(hi))
end

local function dump(state) return cluster.dump(state, TASK) end

-- Waits until node id reports task 0 at the changelog's end, nothing behind.
local function caught_up(bs, id)
  cluster.wait_progress(bs, id, function() return select(2, offsets(bs, CHANGELOG)) end)
end

local function node(bs, id, rack, state, sshd, with_key)
  local args = { "--state-dir", state, "--probing-rebalance-interval-ms", "1000",
                 "--cache-max-bytes", "0", "--bootstrap-min-records", "0",
                 "--bootstrap-timeout-ms", "20000", "--ssh-host", "127.0.0.1",
                 "--ssh-port", tostring(sshd.port) }
  if with_key then
    for _, a in ipairs({ "--ssh-key", sshd.key, "--ssh-known-hosts", sshd.known_hosts,
                         "--ssh-user", sshd.user }) do
      args[#args + 1] = a
    end
  end
  return cluster.start_node(bs, id, rack, cluster.STANDBY, args)
end

-- Everything up to nb's restart; returns what the checks need.
local function make_gap(with_key)
  local sshd = sshd_fixture.start()
  local broker = helpers.start_broker { topics = { "text-lines:1" } }
  local bs = broker.bootstrap
  if helpers.real_kafka() then
    assert(broker:create_topic(CHANGELOG, 1, { ["cleanup.policy"] = "compact,delete",
                                               ["retention.ms"] = 4000, ["segment.ms"] = 1000 }))
  end
  local exact = {}
  local states = { na = helpers.tmpdir(), nb = helpers.tmpdir() }
  local na = node(bs, "na", "a", states.na, sshd, true)
  helpers.eventually(function() return cluster.running(na) == 1 end, 40, 0.1)
  local nb = node(bs, "nb", "b", states.nb, sshd, with_key) -- joins second: the standby
  local input = 0
  local function push(lines)
    helpers.produce(bs, "text-lines", lines, { timeout = 60 })
    input = input + #lines
    helpers.eventually(function()
      return helpers.committed(bs, "text-lines", APP)[0] == input
    end, 60, 0.2)
  end

  nb:wait_event("epoch", function(e) return #e.standby == 1 end, 40)
  push(lines_of(common, COMMON, 0, COMMON - 1, exact))
  caught_up(bs, "nb")
  assert.equal(0, nb:stop()) -- its replica is checkpointed where the changelog ended
  local checkpoint = select(2, offsets(bs, CHANGELOG))

  -- the early words, then common words until the changelog no longer holds the early ones
  local lines = lines_of(early, EARLY, 0, EARLY - 1, exact)
  push(lines_of(common, COMMON, 0, 5 * COMMON - 1, exact, lines))
  local early_end = select(2, offsets(bs, CHANGELOG))
  local chunks, lo, hw = 1, 0, 0
  repeat
    push(lines_of(common, COMMON, 0, 5 * COMMON - 1, exact))
    chunks = chunks + 1
    lo, hw = offsets(bs, CHANGELOG)
    -- Kafka deletes by age: the head goes once its segment has rolled and its newest
    -- record is 4 s old. The cleaner may merge the head into a segment with newer records,
    -- so pause longer than the retention between chunks: then every closed segment is old
    if lo < early_end and helpers.real_kafka() then helpers.sleep(5) end
  until lo >= early_end or chunks >= 10
  assert.is_true(lo >= early_end, "the changelog still starts at " .. lo)
  print(string.format("\n  changelog [%d, %d) after %d chunk(s) of %d words; nb's replica "
                      .. "needs %d, the early words ended at %d", lo, hw, chunks, 5 * COMMON,
                      checkpoint, early_end))

  nb = node(bs, "nb", "b", states.nb, sshd, with_key)
  return { bs = bs, na = na, nb = nb, states = states, exact = exact, checkpoint = checkpoint,
           lo = lo, early_end = early_end }
end

describe("a changelog gap", function()
  after_each(helpers.cleanup)

  local needs = "changelog " .. plain(CHANGELOG) .. " %[0%] starts at offset (%d+) but the " ..
                "store needs (%d+)"

  it("makes the replica's node build it from the active's snapshot; it ends equal to the "
     .. "active's store, counts exact", function()
    local g = make_gap(true)
    g.nb:wait_event("bootstrap_installed", { task = "0_0" }, 60)
    -- (log text: the gap's figures as the operator reads them)
    local log = g.nb:log()
    local x, y = log:match("standby 0_0: cold bootstrap: " .. needs .. "\n")
    assert.is_truthy(x, "nb's log names the gap:\n" .. log)
    x, y = tonumber(x), tonumber(y)
    -- the replica's checkpoint predates the early words; the changelog starts after them
    assert.is_true(y >= COMMON and y <= g.checkpoint, "store needs " .. y)
    assert.is_true(x >= g.lo and x >= g.early_end, "changelog starts at " .. x)
    assert.is_truthy(log:match("bootstrap 0_0: asking na for a snapshot %(" .. needs .. "%)"))
    assert.is_nil(log:find("lost to this replica", 1, true))
    assert.is_nil(g.nb:last_event("bootstrap_failed"), g.nb:events_tail())
    -- then it tails from the snapshot's offset, past the gap
    local from = g.nb:wait_event("standby_tailing", { task = "0_0", store = "counts",
                                                      topic = CHANGELOG, partition = 0 },
                                 20).offset
    assert.is_true(from >= g.lo)
    caught_up(g.bs, "nb")

    assert.equal(0, g.nb:stop())
    assert.equal(0, g.na:stop())
    assert.is_nil(g.nb:log():find("lost to this replica", 1, true))
    local active, n = dump(g.states.na)
    local mine, m = dump(g.states.nb)
    assert.equal(COMMON + EARLY, n)
    assert.equal(n, m)
    for k, v in pairs(active) do assert.equal(v, mine[k], "nb key " .. k) end
    for w, c in pairs(g.exact) do assert.equal(tostring(c), active[w], "count of " .. w) end
  end)

  it("control: without --ssh-key the replica's node says how many updates are lost", function()
    local g = make_gap(false)
    -- (log text: the message is the feature, what an operator or a user reads)
    local x, y, lost = g.nb:wait_log("standby 0_0: " .. needs .. ": (%d+) update%(s%) are "
                                     .. "lost to this replica", 30)
    x, y = tonumber(x), tonumber(y)
    assert.is_true(y >= COMMON and y <= g.checkpoint, "store needs " .. y)
    assert.is_true(x >= g.lo and x >= g.early_end, "changelog starts at " .. x)
    assert.equal(x - y, tonumber(lost))
    assert.is_nil(g.nb:log():find("cold bootstrap", 1, true))
    caught_up(g.bs, "nb")
    assert.equal(0, g.nb:stop())
    assert.equal(0, g.na:stop())
    -- and they are lost: the early words, updated only in the dropped records, are missing
    local mine, m = dump(g.states.nb)
    assert.equal(COMMON, m)
    assert.is_nil(mine[early(0)])
    local active, n = dump(g.states.na)
    assert.equal(COMMON + EARLY, n)
    for i = 0, COMMON - 1 do
      assert.equal(active[common(i)], mine[common(i)])
    end
  end)
end)
