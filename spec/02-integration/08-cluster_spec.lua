-- Several `beck run --cluster 1` nodes of one app share its tasks through
-- the control topic (runtime/member.c), on a dev broker, each node its own
-- process: counts stay exact while a node joins, and nothing is lost when
-- one is killed with SIGKILL.
local helpers = require "spec.helpers"
local cjson = require "cjson"

local WORDCOUNT = "scripts/examples/wordcount.lua"
local APP = "wordcount"

-- Lines keyed by one of 12 buckets whose words no other bucket uses, so
-- each word is counted by one task: the counts are exact.
local function make_lines(from, to, exact)
  local lines = {}
  for i = from, to do
    local b = i % 12
    local words = {}
    for j = 1, 4 do
      local w = "w" .. string.char(97 + b) .. string.char(97 + (i * 7 + j * 13) % 26)
      words[j] = w
      exact[w] = (exact[w] or 0) + 1
    end
    lines[#lines + 1] = { "bucket-" .. b, table.concat(words, " ") }
  end
  return lines
end

local function committed_total(bs)
  local total = 0
  for _, o in pairs(helpers.committed(bs, "text-lines", APP)) do total = total + o end
  return total
end

local function latest(records)
  local kv = {}
  for _, r in ipairs(records) do kv[r.key] = tonumber(r.value) end
  return kv
end

local function node(bs, id, rack)
  return helpers.start_node(WORDCOUNT, { "-b", bs, "--cluster", "1", "--node-id", id,
                                         "--rack", rack, "--commit-interval-ms", "300" },
                            { name = id })
end

local function running(n)
  local last
  for c in n:log():gmatch("epoch %d+: running (%d+) task") do last = tonumber(c) end
  return last
end

describe("a cluster of nodes", function()
  after_each(helpers.cleanup)

  it("shares the tasks, takes in a new node, survives a SIGKILL, and counts exactly",
     function()
    local broker = helpers.start_broker { topics = { "text-lines:12" } }
    local bs = broker.bootstrap
    local exact = {}
    local a, b, c = node(bs, "na", "a"), node(bs, "nb", "b"), node(bs, "nc", "c")
    -- three nodes: 4 tasks each
    helpers.eventually(function()
      return running(a) == 4 and running(b) == 4 and running(c) == 4
    end, 30, 0.2)
    helpers.produce(bs, "text-lines", make_lines(1, 20000, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == 20000 end, 60, 0.3)

    -- a fourth node joins: 3 tasks each
    local d = node(bs, "nd", "a")
    helpers.eventually(function()
      return running(a) == 3 and running(b) == 3 and running(c) == 3 and running(d) == 3
    end, 30, 0.2)
    helpers.produce(bs, "text-lines", make_lines(20001, 40000, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == 40000 end, 60, 0.3)
    local kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, n in pairs(exact) do assert.equal(n, kv[w], "count of " .. w) end

    -- SIGKILL of one node: its tasks move to the others after the session
    -- timeout, and what it had not committed is processed again (>= exact)
    d:kill()
    helpers.produce(bs, "text-lines", make_lines(40001, 50000, exact), { timeout = 60 })
    helpers.eventually(function()
      return running(a) + running(b) + running(c) == 12
    end, 40, 0.3)
    helpers.eventually(function() return committed_total(bs) == 50000 end, 60, 0.3)
    kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, n in pairs(exact) do
      assert.is_true((kv[w] or 0) >= n, "lost updates of " .. w)
    end
    for _, n in ipairs { a, b, c } do assert.equal(0, n:stop()) end
  end)
end)
