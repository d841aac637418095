-- The docs stand alone: every relative link in README.md, docs/ and the runtime's READMEs
-- names a file of this repository that exists, and no doc points outside it (a clone has
-- no ../shared, no /work).
local helpers = require "spec.helpers"

local function docs()
  local list = {}
  local p = io.popen("ls README.md docs/*.md runtime/README.md runtime/*/README.md " ..
                     "fuzz/README.md 2>/dev/null")
  for f in p:lines() do list[#list + 1] = f end
  p:close()
  return list
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

-- a/b/../c -> a/c
local function normalize(path)
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." then
      if #parts == 0 or parts[#parts] == ".." then parts[#parts + 1] = ".." else parts[#parts] = nil end
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return table.concat(parts, "/")
end

describe("the docs", function()
  it("link only files of the repository, which exist", function()
    local bad = {}
    local files = docs()
    assert.is_true(#files > 10)
    for _, f in ipairs(files) do
      local text = assert(io.open(f)):read("*a")
      local dir = f:match("^(.*)/[^/]*$") or "."
      local n = 0
      for line in (text .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        if line:match("%.%./shared") or line:match("/work/") then
          bad[#bad + 1] = string.format("%s:%d: points outside the repository: %s", f, n, line)
        end
        for target in line:gmatch("%]%(([^)%s]+)%)") do
          if not target:match("^%a[%w+.-]*:") and not target:match("^#") then
            local path = normalize(dir .. "/" .. target:gsub("#.*$", ""))
            if path:match("^%.%.") then
              bad[#bad + 1] = string.format("%s:%d: link %s leaves the repository", f, n, target)
            elseif not exists(path) then
              bad[#bad + 1] = string.format("%s:%d: link %s: no file %s", f, n, target, path)
            end
          end
        end
      end
    end
    assert.equal("", table.concat(bad, "\n"))
  end)

  -- Each layer's README is its map: a module missing from it is a room with no door.
  local function unnamed_modules(layer_dir)
    local readme = assert(io.open(layer_dir .. "/README.md")):read("*a")
    local missing = {}
    local p = io.popen("ls " .. layer_dir .. "/*.c 2>/dev/null")
    for f in p:lines() do
      local name = f:match("([^/]+)%.c$")
      -- named as a word: "thread_tasks" in "(+ thread_setup, thread_tasks, ...)"
      if not (" " .. readme .. " "):find("[^%w_]" .. name:gsub("%p", "%%%0") .. "[^%w_]") then
        missing[#missing + 1] = f
      end
    end
    p:close()
    return missing
  end

  it("name every module of runtime/ in its layer's README", function()
    local missing, layers = {}, 0
    local p = io.popen("ls -d runtime/*/")
    for dir in p:lines() do
      dir = dir:gsub("/$", "")
      layers = layers + 1
      for _, f in ipairs(unnamed_modules(dir)) do missing[#missing + 1] = f end
    end
    p:close()
    assert.is_true(layers >= 8)
    assert.equal("", table.concat(missing, "\n"))
    -- the check can fail: a layer whose README names none of its modules
    local dir = helpers.tmpdir()
    assert(io.open(dir .. "/README.md", "w")):close()
    assert(io.open(dir .. "/lonely.c", "w")):close()
    assert.same({ dir .. "/lonely.c" }, unnamed_modules(dir))
  end)

  it("catch a link that leaves the repository (the check can fail)", function()
    local dir = helpers.tmpdir()
    assert.equal("x", normalize("docs/../x"))
    assert.is_truthy(normalize("docs/../../shared/DESIGN.md"):match("^%.%."))
    assert.is_false(exists(dir .. "/none.md"))
  end)
end)
