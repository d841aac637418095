-- What `make demo` (and `make`, `make install`) set up: vendor/install build installs the
-- build's packages and fetches nothing from Maven; only `make deps` / `make test`
-- (vendor/install all) fetch the Apache Kafka jars. Run on a copy of vendor/ without the jars,
-- with an `mvn` first on PATH that records being called.
local helpers = require "spec.helpers"

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  return tonumber(out:match("rc=(%d+)%s*$")), out
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

describe("vendor/install", function()
  after_each(helpers.cleanup)

  it("build fetches nothing from Maven; all fetches the pinned Kafka", function()
    local dir = helpers.tmpdir()
    local rc = sh(string.format("mkdir -p %s/vendor/kafka %s/bin && cp vendor/install " ..
                                "vendor/packages.txt vendor/packages-test.txt %s/vendor/ && " ..
                                "cp vendor/kafka/pom.xml %s/vendor/kafka/", dir, dir, dir, dir))
    assert.equal(0, rc)
    local f = assert(io.open(dir .. "/bin/mvn", "w"))
    f:write("#!/bin/sh\necho \"$@\" >> " .. dir .. "/mvn-called\nexit 1\n")
    f:close()
    assert.equal(0, (sh("chmod +x " .. dir .. "/bin/mvn")))
    local env = "PATH=" .. dir .. "/bin:$PATH "

    local st, out = sh(env .. dir .. "/vendor/install build")
    assert.equal(0, st, out)
    assert.is_false(exists(dir .. "/mvn-called"), out)
    assert.is_false(exists(dir .. "/vendor/kafka/lib"), out)

    -- the suite's set-up does fetch (so the check above can fail)
    st, out = sh(env .. dir .. "/vendor/install all")
    assert.is_true(exists(dir .. "/mvn-called"), out)
    assert.is_not.equal(0, st)
    assert.matches("mvn could not fetch Kafka", out)
  end)

  it("refuses a mode it does not know", function()
    local st, out = sh("vendor/install everything")
    assert.equal(2, st)
    assert.matches("usage: vendor/install %[build|all%]", out)
  end)
end)
