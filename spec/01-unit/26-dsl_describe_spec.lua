-- `beck describe` of a DSL topology (beck.internal.describe): the topics it
-- reads, writes and owns, its subtopologies, and for each node the DSL
-- operation and topology line that made it.
local beck = require "beck"
local describe_mod = require "beck.internal.describe"

local function this_line()
  return debug.getinfo(2, "l").currentline
end

describe("beck describe of a DSL topology", function()
  it("lists topics, subtopologies, processors with their operation and line, and stores", function()
    local app = beck.app { id = "wc" }
    local l1 = this_line() + 1
    app:stream("text-lines")
       :flat_map(function(_, line) return { { line, 1 } } end)
       :group_by_key()
       :count { store = "counts" }
       :to("word-counts")
    local text = describe_mod.text(app)
    local here = "26%-dsl_describe_spec.lua:"
    assert.matches("^app wc\n  topics\n", text)
    assert.matches("\n    text%-lines%s+input\n", text)
    assert.matches("\n    wc%-counts%-repartition%s+repartition topic %(internal, " ..
                   "partitions of the widest input%)\n", text)
    assert.matches("\n    word%-counts%s+output\n", text)
    assert.matches("\n    wc%-counts%-changelog%s+changelog of store counts\n", text)
    assert.matches("\n  subtopology 0\n    source source%-1 <%- text%-lines  %(stream, .*" ..
                   here .. l1 .. "%)\n", text)
    assert.matches("\n    processor flat_map%-1  %(flat_map, .*" .. here .. (l1 + 1) .. "%)\n",
                   text)
    assert.matches("\n    sink counts%-repartition%-sink %-> wc%-counts%-repartition  " ..
                   "%(repartition, .*" .. here .. (l1 + 2) .. "%)\n", text)
    assert.matches("\n  subtopology 1\n    source counts%-repartition%-source <%- " ..
                   "wc%-counts%-repartition %(internal%)", text)
    assert.matches("\n    processor count%-1 %[stores: counts%]  %(count, .*" .. here .. (l1 + 3) ..
                   "%)\n", text)
    assert.matches("\n    store counts %(changelog wc%-counts%-changelog%)\n", text)
  end)

  it("describes processor-API nodes as before, without an operation", function()
    local app = beck.app { id = "api" }
    app:source("in", "in")
    app:processor("p", { process = function() end }, "in")
    app:sink("out", "out", "p")
    local text = describe_mod.text(app)
    assert.matches("\n    processor p\n      %-> out\n", text)
    assert.matches("\n    in%s+input\n    out%s+output\n", text)
  end)
end)
