-- Every command reads its arguments through one parser (runtime/cmd/cmd_opts.c): the same
-- errors, "--name=value" as well as "--name value", and -b/-X/-F wherever a command talks to
-- Kafka (before it, -F worked in 3 of the 5 commands that took -X).
local helpers = require "spec.helpers"

local function beck(args)
  local argv = { helpers.beck_bin() }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local st, out, err = helpers.run(argv, { name = "beck-" .. args[1], timeout = 30 })
  return st, out, err
end

local KAFKA = { "run", "status", "get", "scan", "skip", "repartition", "bootstrap" }
local OTHERS = { "dump", "fetch", "snapshot", "broker", "describe" }

describe("the commands' options", function()
  after_each(helpers.cleanup)

  it("refuse an unknown option the same way in every command", function()
    for _, list in ipairs { KAFKA, OTHERS } do
      for _, cmd in ipairs(list) do
        local st, _, err = beck { cmd, "--bogus" }
        assert.is_true(st ~= 0, cmd)
        assert.matches("beck " .. cmd .. ": unknown option %-%-bogus %(see beck " .. cmd
                       .. " %-%-help%)", err)
      end
    end
  end)

  it("take -F FILE in every command that takes -X, and read it", function()
    local dir = helpers.tmpdir()
    local bad = dir .. "/bad.properties"
    local f = assert(io.open(bad, "w"))
    f:write("no equals sign here\n")
    f:close()
    for _, cmd in ipairs(KAFKA) do
      local st, _, err = beck { cmd, "-F", dir .. "/missing.properties" }
      assert.is_true(st ~= 0, cmd)
      assert.matches("beck " .. cmd .. ": .*missing%.properties", err)
      st, _, err = beck { cmd, "-F", bad }
      assert.is_true(st ~= 0, cmd)
      assert.matches("beck " .. cmd .. ": .*bad%.properties", err)
    end
    for _, cmd in ipairs(OTHERS) do -- no Kafka: -F is not theirs
      local _, _, err = beck { cmd, "-F", bad }
      assert.matches("unknown option %-F", err)
    end
  end)

  it("say which option lacks its value, and which number is out of range", function()
    local st, _, err = beck { "repartition", "--app" }
    assert.is_true(st ~= 0)
    assert.matches("beck repartition: %-%-app needs a value", err)
    st, _, err = beck { "repartition", "--partitions=x" }
    assert.is_true(st ~= 0)
    assert.matches("beck repartition: %-%-partitions x: a whole number from 0 to", err)
    st, _, err = beck { "status", "--timeout-ms", "0" }
    assert.equal(2, st)
    assert.matches("beck status: %-%-timeout%-ms 0: a whole number from 1 to 3600000", err)
    st, _, err = beck { "skip", "--to-dlq=1" }
    assert.is_true(st ~= 0)
    assert.matches("beck skip: %-%-to%-dlq takes no value", err)
    st, _, err = beck { "describe", "a.lua", "b.lua" }
    assert.equal(2, st)
    assert.matches("beck describe: too many arguments: b%.lua", err)
  end)

  it("take --name=value as --name value", function()
    -- both reach the same check past the parser: -b and --app are there, the task is not
    local _, _, e1 = beck { "bootstrap", "-b", "127.0.0.1:1", "--app", "a", "--task", "x" }
    local _, _, e2 = beck { "bootstrap", "-b", "127.0.0.1:1", "--app=a", "--task=x" }
    assert.matches("%-%-task x: a task is SUBTOPOLOGY_PARTITION", e1)
    assert.equal(e1, e2)
  end)
end)
