-- A running app's plan grown by later generations (runtime/engine/plan.c, bk_plan_grow):
-- what a move to another task count adds to it (docs/repartitioning.md, Moving a
-- generation). The plan's tables are shared by every thread of a node, so a generation
-- is appended: what was there keeps its index, and the new entries are complete.
local ffi = require "ffi"
local C = ffi.C

local TOPOLOGY = "spec/fixtures/stamped_count.lua"

-- The plan of TOPOLOGY with `tasks`, grown by each list of `grows` in turn, as lines.
local function grown(tasks, grows)
  local out = ffi.new("char[?]", 65536)
  local err = ffi.new("const char *[1]")
  local arr = ffi.new("const char *[?]", #grows + 1, grows)
  if C.bk_ffi_plan_grow(TOPOLOGY, tasks, arr, #grows, out, 65536, err) ~= 0 then
    return nil, ffi.string(err[0])
  end
  local lines = {}
  for l in ffi.string(out):gmatch("[^\n]+") do lines[#lines + 1] = l end
  return lines
end

local function only(lines, kind)
  local out = {}
  for _, l in ipairs(lines) do
    if l:sub(1, #kind + 1) == kind .. " " then out[#out + 1] = l end
  end
  return out
end

describe("a plan grown by later generations", function()
  it("appends generation 2 and 3 of a subtopology, leaving every index as it was", function()
    local before = assert(grown("0=8", {}))
    local after = assert(grown("0=8", { "0=12", "0=12,0=5" }))
    -- what was there is there still, line for line (the loaded topics' partitions are the
    -- cluster's, unknown here, and so 0 in both)
    local bt, at = only(before, "topic"), only(after, "topic")
    for i, l in ipairs(bt) do assert.equal(l, at[i]) end
    assert.same({
      "topic 3 stamped-0-repartition-g2 sub=2 generation=2 partitions=12 pass_to=-1",
      "topic 4 stamped-0-repartition-g3 sub=3 generation=3 partitions=5 pass_to=-1",
    }, { at[#bt + 1], at[#bt + 2] })
    assert.equal(#bt + 2, #at)
    local bs, as = only(before, "sub"), only(after, "sub")
    for i, l in ipairs(bs) do assert.equal(l, as[i]) end
    assert.same({ "sub 2 of=0 generation=2 partitions=12 topics=3",
                  "sub 3 of=0 generation=3 partitions=5 topics=4" },
                { as[#bs + 1], as[#bs + 2] })
    local bst, ast = only(before, "store"), only(after, "store")
    for i, l in ipairs(bst) do assert.equal(l, ast[i]) end
    assert.same({ "store 0 counts sub=0 changelog=stamped-counts-changelog-g1 of_store=-1",
                  "store 1 counts sub=2 changelog=stamped-counts-changelog-g2 of_store=0",
                  "store 2 counts sub=3 changelog=stamped-counts-changelog-g3 of_store=0" },
                ast)
    -- the passthrough (subtopology 1) forwards to generation 1 until a move switches it
    assert.equal("topic 0 stamp-in sub=1 generation=0 partitions=0 pass_to=2", at[1])
    -- the task table gained the new subtopologies' tasks, in order, within its room
    assert.equal("tasks 0 cap=4096", only(before, "tasks")[1])
    assert.equal("tasks 17 cap=4096 2_0 2_1 2_2 2_3 2_4 2_5 2_6 2_7 2_8 2_9 2_10 2_11 " ..
                 "3_0 3_1 3_2 3_3 3_4", only(after, "tasks")[1])
  end)

  it("moves a subtopology read by input partition to generation 1 with a passthrough",
     function()
    local before = assert(grown(nil, {}))
    local after = assert(grown(nil, { "0=6", "0=6,0=3" }))
    -- the input is handed to the passthrough (subtopology 1), which forwards to generation
    -- 1's topic; generation 0 (subtopology 0) keeps its index, topics and store
    local bt, at = only(before, "topic"), only(after, "topic")
    assert.equal("topic 0 stamp-in sub=0 generation=0 partitions=0 pass_to=-1", bt[1])
    assert.equal("topic 0 stamp-in sub=1 generation=0 partitions=0 pass_to=2", at[1])
    assert.same({
      "topic 2 stamped-0-repartition-g1 sub=2 generation=1 partitions=6 pass_to=-1",
      "topic 3 stamped-0-repartition-g2 sub=3 generation=2 partitions=3 pass_to=-1",
    }, { at[3], at[4] })
    local bs, as = only(before, "sub"), only(after, "sub")
    for i, l in ipairs(bs) do assert.equal(l, as[i]) end
    assert.same({ "sub 1 of=0 generation=0 partitions=6 topics=0",
                  "sub 2 of=0 generation=1 partitions=6 topics=2",
                  "sub 3 of=0 generation=2 partitions=3 topics=3" },
                { as[#bs + 1], as[#bs + 2], as[#bs + 3] })
    assert.same({ "store 0 counts sub=0 changelog=stamped-counts-changelog of_store=-1",
                  "store 1 counts sub=2 changelog=stamped-counts-changelog-g1 of_store=0",
                  "store 2 counts sub=3 changelog=stamped-counts-changelog-g2 of_store=0" },
                only(after, "store"))
  end)

  it("refuses a list that does not extend the plan's", function()
    local _, err = grown("0=8", { "0=12", "0=5" })
    assert.equal("generations 0=5 do not extend the plan's (0=12)", err)
    _, err = grown("0=8", { "0=12", "0=120" })
    assert.equal("generations 0=120 do not extend the plan's (0=12)", err)
    assert.truthy(grown("0=8", { "0=12", "0=12" })) -- nothing new: nothing added
  end)

  it("has room for many moves in one process, and says when there is none", function()
    local list = {}
    for i = 1, 256 do list[i] = (i % 2 == 0) and "0=3" or "0=4" end
    local plan = assert(grown("0=8", { table.concat(list, ",", 1, 100),
                                       table.concat(list, ",", 1, 256) }))
    assert.equal(258, #only(plan, "sub"))
    list[257] = "0=7"
    local _, err = grown("0=8", { table.concat(list, ",") })
    assert.truthy(err:find("no room for generations", 1, true), err)
    -- and tasks: 4,096 more than the table had when it was made
    plan = assert(grown("0=8", { "0=4000", "0=4000,0=96" }))
    assert.truthy(only(plan, "tasks")[1]:find("^tasks 4096 cap=4096 "))
    _, err = grown("0=8", { "0=4000", "0=4000,0=97" })
    assert.equal("no room for generations 0=4000,0=97 in this process (" ..
                 "259 topics, 258 subtopologies, 257 stores, 4096 tasks at most)", err)
  end)
end)
