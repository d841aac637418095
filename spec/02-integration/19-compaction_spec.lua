-- A compacted changelog on a real Apache Kafka: the log cleaner keeps the newest record of
-- each key, so the commit markers (all under one key, runtime/engine/store.h) must leave a log that
-- a replica still reads right. wordcount counts 300 words 200,000 times with its cache off
-- (every update reaches the changelog); the changelog rolls a segment every 300 ms and is
-- cleaned as soon as possible; once the cleaner has removed most records, a node with a
-- wiped state directory restores from what is left, and every count is exact.
-- Then what a takeover drops: a node killed before it committed anything leaves writes after
-- its last marker; the next owner drops them and writes their keys again with their
-- committed values (tombstones here), so that once the cleaner has removed the markers
-- around them, a fresh replica does not take them for committed state.
-- Real Kafka only: the dev broker never compacts (docs/dev-broker.md).
local helpers = require "spec.helpers"
local cjson = require "cjson"

local WORDCOUNT = "scripts/examples/wordcount.lua"
local APP = "wordcount"
local CHANGELOG = APP .. "-counts-changelog"
local LINES, WORDS = 40000, 300

local function make_lines(from, to, exact)
  local lines = {}
  for i = from, to do
    local words = {}
    for j = 1, 5 do
      local w = "w" .. ((i * 7 + j * 131) % WORDS)
      words[j] = w:gsub("%d", function(d) return string.char(97 + tonumber(d)) end)
      exact[words[j]] = (exact[words[j]] or 0) + 1
    end
    -- one partition: every word's count in one task
    lines[#lines + 1] = { "k", table.concat(words, " ") }
  end
  return lines
end

local function dump(state_dir, app, store)
  local st, out, err = helpers.run({ helpers.beck_bin(), "dump", "--state-dir", state_dir,
                                     "--app", app or APP, "--store", store or "counts" })
  assert(st == 0, "beck dump failed: " .. tostring(err))
  local all = {}
  for line in out:gmatch("[^\n]+") do
    local r = cjson.decode(line)
    all[r.key] = tonumber(r.value) or r.value
  end
  return all
end

local function committed_total(bs)
  local total = 0
  for _, o in pairs(helpers.committed(bs, "text-lines", APP)) do total = total + o end
  return total
end

describe("a compacted changelog", function()
  after_each(helpers.cleanup)

  if not helpers.real_kafka() then
    it("is cleaned by a real broker only", function()
      pending("needs BECK_SPEC_BACKEND=kafka: the dev broker does not compact")
    end)
    return
  end

  it("still restores every count exactly after the log cleaner removed most records", function()
    helpers.with_timeout(240, function()
      local kafka = helpers.kafka { topics = { "text-lines:1" } }
      local bs = kafka.bootstrap
      assert(kafka:create_topic(CHANGELOG, 1, {
        ["cleanup.policy"] = "compact", ["segment.ms"] = 300,
        ["min.cleanable.dirty.ratio"] = "0.01", ["min.compaction.lag.ms"] = 0,
      }))
      local state = helpers.tmpdir()
      local node = helpers.start_node(WORDCOUNT, { "-b", bs, "--state-dir", state,
                                                   "--cache-max-bytes", "0",
                                                   "--commit-interval-ms", "200" })
      node:wait_running(30)
      -- written in chunks over a few seconds, so that many segments roll
      local exact = {}
      local chunk = LINES / 8
      for c = 0, 7 do
        helpers.produce(bs, "text-lines", make_lines(c * chunk + 1, (c + 1) * chunk, exact),
                        { timeout = 60 })
      end
      helpers.eventually(function() return committed_total(bs) == LINES end, 90, 0.3)
      local updates = LINES * 5

      -- the cleaner has run: most of the changelog's offsets hold no record any more
      local kept, high
      helpers.eventually(function()
        local recs = helpers.consume(bs, CHANGELOG, { timeout = 60 })
        high = helpers.offsets(bs, CHANGELOG)[0][2]
        kept = #recs
        return kept < high / 4, string.format("%d records left of %d offsets", kept, high)
      end, 90, 1)
      assert.is_true(high > updates, "every update and the markers reached the changelog")
      -- what is left: each word's newest count, and markers
      local markers, newest = 0, {}
      for _, r in ipairs(helpers.consume(bs, CHANGELOG, { timeout = 60 })) do
        if helpers.is_marker(r) then
          markers = markers + 1
          assert.matches("^beck%-commit 1 1 %d+$", r.value)
        else
          newest[r.key] = tonumber(r.value)
        end
      end
      assert.is_true(markers >= 1)
      assert.same(exact, newest)
      assert.equal(0, node:stop())
      assert.same(exact, dump(state))

      -- a wiped state directory restores from the compacted log, key by key
      os.execute("rm -rf '" .. state .. "'")
      local again = helpers.start_node(WORDCOUNT, { "-b", bs, "--state-dir", state })
      again:wait_running(60)
      local replayed = 0
      for _, e in ipairs(again:events("restore_done")) do replayed = replayed + e.records end
      assert.is_true(replayed < high / 4, "replayed " .. tostring(replayed) .. " records")
      assert.equal(0, again:stop())
      assert.same(exact, dump(state))
      print(string.format("\n  compacted changelog: %d records left of %d offsets (%d markers); "
                          .. "restored %d records, %d words exact", kept, high, markers,
                          replayed, WORDS))
    end)
  end)

  it("does not bring back what a takeover dropped once its markers are compacted away",
     function()
    helpers.with_timeout(180, function()
      local FIXTURE, TAGGED = "spec/fixtures/tagged.lua", "tagged-kept-changelog"
      local N = 3000
      local kafka = helpers.kafka { topics = { "in:1" } }
      local bs = kafka.bootstrap
      assert(kafka:create_topic(TAGGED, 1, {
        ["cleanup.policy"] = "compact", ["segment.ms"] = 300, ["delete.retention.ms"] = 1000,
        ["min.cleanable.dirty.ratio"] = "0.01", ["min.compaction.lag.ms"] = 0,
      }))
      local recs = {}
      for i = 1, N do recs[i] = { "k" .. i, "v" .. i } end
      helpers.produce(bs, "in", recs)
      local state = helpers.tmpdir()
      local function run(tag, args)
        local argv = { "-b", bs, "--state-dir", state }
        for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
        return helpers.start_node(FIXTURE, argv, { env = { BECK_SPEC_TAG = tag } })
      end

      -- run a writes every record under a:..., commits nothing, and is killed
      local a = run("a", { "--commit-interval-ms", "600000" })
      helpers.eventually(function()
        return helpers.offsets(bs, TAGGED)[0][2] > N
      end, 60, 0.2)
      a:kill()

      -- run b drops a's writes (their input was not committed) and processes it again
      local b = run("b", { "--commit-interval-ms", "200" })
      -- (log text: the message is the feature, what an operator or a user reads)
      b:wait_log("dropped: their input was not committed", 60)
      b:wait_log(N .. " key%(s%) written again with their committed values", 30)
      helpers.eventually(function()
        return helpers.committed(bs, "in", "tagged")[0] == N
      end, 60, 0.2)
      helpers.sleep(0.5)
      helpers.produce(bs, "in", { { "late", "v" } }) -- rolls the segment
      helpers.eventually(function()
        return helpers.committed(bs, "in", "tagged")[0] == N + 1
      end, 60, 0.2)

      -- the cleaner removed a's records and the markers around them
      helpers.eventually(function()
        local values, markers = 0, 0
        for _, r in ipairs(helpers.consume(bs, TAGGED)) do
          if helpers.is_marker(r) then
            markers = markers + 1
          elseif r.key:match("^a:") and r.value then
            values = values + 1
          end
        end
        return values == 0 and markers <= 3,
               values .. " a: records with a value, " .. markers .. " markers"
      end, 60, 1)
      assert.equal(0, b:stop())

      -- a wiped replica reads b's state only
      os.execute("rm -rf '" .. state .. "'")
      local c = run("c")
      c:wait_running(60)
      assert.equal(0, c:stop())
      local kept, n = dump(state, "tagged", "kept"), 0
      for k in pairs(kept) do
        assert.matches("^b:", k)
        n = n + 1
      end
      assert.equal(N + 1, n)
    end)
  end)
end)
