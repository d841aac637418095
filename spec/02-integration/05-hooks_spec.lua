-- Operational hooks from a hooks file named on the command line (--hooks).
local helpers = require "spec.helpers"

describe("a hooks file", function()
  after_each(helpers.cleanup)

  it("adds its hooks to the topology's, and they run", function()
    local node = helpers.start_node("scripts/examples/wordcount.lua",
                                    { "--hooks", "spec/fixtures/hooks.lua" })
    node:wait_running(30)
    assert.matches("hooks file: restore done, 0 of 0 records", node:log())
    -- the file's on_restore replaced the topology's own
    assert.not_matches("wordcount: restored", node:log())
    assert.equal(0, node:stop())
  end)

  it("stops start-up with a clear error when it is not a table of functions", function()
    local bad = helpers.tmpdir() .. "/bad_hooks.lua"
    helpers.write_file(bad, "return { on_restore = 5 }\n")
    local node = helpers.start_node("scripts/examples/wordcount.lua", { "--hooks", bad })
    assert.equal(1, node:wait(20))
    assert.matches("cannot load hooks: .*bad_hooks.lua: hook on_restore is not a function",
                   node:log())
  end)
end)
