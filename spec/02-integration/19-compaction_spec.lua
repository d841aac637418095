-- A compacted changelog on a real Apache Kafka: the log cleaner keeps the newest record of
-- each key, so the commit markers (all under one key, runtime/store.h) must leave a log that
-- a replica still reads right. wordcount counts 300 words 200,000 times with its cache off
-- (every update reaches the changelog); the changelog rolls a segment every 300 ms and is
-- cleaned as soon as possible; once the cleaner has removed most records, a node with a
-- wiped state directory restores from what is left, and every count is exact.
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

local function dump(state_dir)
  local st, out, err = helpers.run({ helpers.beck_bin(), "dump", "--state-dir", state_dir,
                                     "--app", APP, "--store", "counts" })
  assert(st == 0, "beck dump failed: " .. tostring(err))
  local all = {}
  for line in out:gmatch("[^\n]+") do
    local r = cjson.decode(line)
    all[r.key] = tonumber(r.value)
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
      local replayed = tonumber(again:log():match("restore: (%d+) of %d+ records [^\n]*done"))
      assert.is_true(replayed < high / 4, "replayed " .. tostring(replayed) .. " records")
      assert.equal(0, again:stop())
      assert.same(exact, dump(state))
      print(string.format("\n  compacted changelog: %d records left of %d offsets (%d markers); "
                          .. "restored %d records, %d words exact", kept, high, markers,
                          replayed, WORDS))
    end)
  end)
end)
