-- The include direction of runtime/ (runtime/README.md): scripts/layers passes on the tree,
-- and fails, naming file, line and layers, on examples that break the rule.
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out:gsub("rc=%d+%s*$", "")
end

local function tree(files)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir) == 0)
  for path, text in pairs(files) do
    local sub = path:match("^(.*)/[^/]+$")
    if sub then assert(os.execute("mkdir -p " .. dir .. "/" .. sub) == 0) end
    local f = assert(io.open(dir .. "/" .. path, "w"))
    f:write(text)
    f:close()
  end
  return dir
end

-- scripts/layers over a tree of these files; its exit status and output.
local function layers(files)
  local d = tree(files)
  local rc, out = sh("scripts/layers " .. d)
  os.execute("rm -rf " .. d)
  return rc, out
end

describe("scripts/layers", function()
  it("passes on runtime/", function()
    local rc, out = sh("scripts/layers")
    assert.equal(0, rc, out)
    assert.equal("", out)
  end)

  it("passes on includes of the same or a lower layer", function()
    local rc, out = layers({
      ["base/a.h"] = "#include <stdio.h>\n",
      ["engine/b.c"] = '#include "engine/b.h"\n#include "base/a.h"\n',
      ["cmd/c.c"] = '#include "engine/b.h"\n#include "node/n.h"\n#include "base/a.h"\n',
    })
    assert.equal(0, rc, out)
  end)

  it("fails when a lower layer includes a higher one, naming file and line", function()
    local rc, out = layers({
      ["base/a.h"] = "/* a */\n#include <stdio.h>\n",
      ["base/a.c"] = '#include "base/a.h"\n\n#include "engine/thread.h"\n',
      ["cluster/v.c"] = '#include "cluster/v.h"\n  #  include "replica/standby.h"\n',
    })
    assert.equal(1, rc)
    assert.matches("base/a%.c:3: base includes engine %(\"engine/thread%.h\"%): a lower layer " ..
                   "may not include a higher one", out)
    assert.matches("cluster/v%.c:2: cluster includes replica", out)
    assert.not_matches("a%.h", out)
  end)

  it("fails on an include that names no layer, and on a file outside the layers", function()
    local rc, out = layers({
      ["engine/b.c"] = '#include "store.h"\n#include "widgets/w.h"\n',
      ["loose.c"] = "int x;\n",
    })
    assert.equal(1, rc)
    assert.matches('engine/b%.c:1: includes "store%.h", which names no layer', out)
    assert.matches('engine/b%.c:2: includes "widgets/w%.h", which names no layer', out)
    assert.matches("loose%.c: not in a layer folder", out)
  end)
end)
