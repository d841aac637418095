-- The fuzz targets' corpora replayed (fuzz/README.md): every input of fuzz/corpus/<target>/,
-- the seeds and the crashers found and fixed, goes once through its target as `make` built it
-- (build/replay/<target>, this build's compiler and flags: under AddressSanitizer with
-- SAN=1). A target that crashes or trips its own checks on one fails here.
local helpers = require "spec.helpers"

local function list(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

local targets = list("ls fuzz/*.c | sed 's:fuzz/::; s:\\.c$::' | grep -v '^replay$'")

describe("the fuzz corpora", function()
  it("has a target for every decoder of outside bytes, each with a corpus", function()
    assert.same({ "assigncodec", "checkpoint", "http", "manifest", "member", "properties",
                  "scanpage", "settings" },
                targets)
    for _, t in ipairs(targets) do
      assert.is_true(#list("ls fuzz/corpus/" .. t) > 0, "fuzz/corpus/" .. t .. " is empty")
    end
  end)

  for _, t in ipairs(targets) do
    it("replay without a crash: " .. t, function()
      local bin = "build/replay/" .. t
      assert.is_truthy(helpers.read_file(bin), bin .. " is missing: make builds it")
      local st, out, err = helpers.run({ bin, "fuzz/corpus/" .. t }, { name = "replay-" .. t,
                                                                        timeout = 120 })
      assert.equal(0, st, t .. " failed on its corpus:\n" .. tostring(err))
      local n = tonumber(out:match("(%d+) inputs"))
      assert.is_true(n and n > 0, "no input replayed: " .. out)
    end)
  end

  it("fails on an input it cannot read, instead of passing silently", function()
    local st = helpers.run({ "build/replay/manifest", "fuzz/corpus/manifest/no-such-input" },
                           { name = "replay-missing", timeout = 60 })
    assert.are_not.equal(0, st)
  end)
end)
