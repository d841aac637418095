-- The DSL's modules (lua/beck/internal/dsl/, behind the public lua/beck/dsl.lua): no
-- require inside a function body, no require cycle, and nothing shipped or in the examples
-- reaching past beck.dsl into them. Read from the sources on disk.

local function read(path)
  local f = assert(io.open(path))
  local s = f:read("*a")
  f:close()
  return s
end

local function ls(pattern)
  local p = io.popen("ls " .. pattern .. " 2>/dev/null")
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- The modules a source requires: { top = {name...}, nested = {"line N: name"...} }. A
-- require at the start of a line is at the top level (the code is indented by scope).
local function requires(src)
  local r = { top = {}, nested = {} }
  local n = 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local code = line:gsub("%-%-.*$", "")
    for name in code:gmatch("require%s*%(?%s*[\"']([%w%._]+)[\"']") do
      if code:match("^%S") then
        r.top[#r.top + 1] = name
      else
        r.nested[#r.nested + 1] = string.format("line %d: %s", n, name)
      end
    end
  end
  return r
end

-- A cycle in graph (name -> {names}) as "a -> b -> a", or nil.
local function cycle(graph)
  local state, path = {}, {}
  local function visit(m)
    if state[m] == 1 then
      local from
      for i, p in ipairs(path) do if p == m then from = i end end
      local c = {}
      for i = from, #path do c[#c + 1] = path[i] end
      c[#c + 1] = m
      return table.concat(c, " -> ")
    end
    if state[m] == 2 then return nil end
    state[m], path[#path + 1] = 1, m
    for _, d in ipairs(graph[m] or {}) do
      local c = visit(d)
      if c then return c end
    end
    state[m], path[#path] = 2, nil
    return nil
  end
  for m in pairs(graph) do
    local c = visit(m)
    if c then return c end
  end
  return nil
end

local function dsl_graph(files)
  local graph, nested = {}, {}
  for path, src in pairs(files) do
    local name = path:match("lua/(.*)%.lua$"):gsub("/", ".")
    local r = requires(src)
    graph[name] = r.top
    for _, n in ipairs(r.nested) do nested[#nested + 1] = path .. " " .. n end
  end
  return graph, nested
end

describe("the DSL's modules", function()
  local files = {}
  for _, path in ipairs(ls("lua/beck/internal/dsl/*.lua")) do files[path] = read(path) end
  files["lua/beck/dsl.lua"] = read("lua/beck/dsl.lua")

  it("are where the public face expects them", function()
    assert.is_true(#ls("lua/beck/internal/dsl/*.lua") >= 6)
    assert.same({}, ls("lua/beck/dsl/*.lua"))
  end)

  it("require nothing inside a function body, and form no require cycle", function()
    local graph, nested = dsl_graph(files)
    assert.same({}, nested)
    assert.is_nil(cycle(graph))
  end)

  it("are required only by beck.dsl and by each other", function()
    local outside = {}
    local paths = ls("lua/beck/*.lua lua/beck/internal/*.lua scripts/examples/*.lua " ..
                     "spec/fixtures/*.lua")
    for _, path in ipairs(paths) do
      if path ~= "lua/beck/dsl.lua" then
        for _, name in ipairs(requires(read(path)).top) do
          if name:match("^beck%.internal%.dsl") then outside[#outside + 1] = path end
        end
      end
    end
    assert.same({}, outside)
  end)

  it("the checks catch a late require and a cycle", function()
    local graph, nested = dsl_graph({
      ["lua/beck/internal/dsl/a.lua"] = 'local b = require "beck.internal.dsl.b"\n',
      ["lua/beck/internal/dsl/b.lua"] = 'local c = require "beck.internal.dsl.c"\n' ..
                                        'function f()\n  return require("x.y")\nend\n',
      ["lua/beck/internal/dsl/c.lua"] = 'require "beck.internal.dsl.a"\n',
    })
    assert.same({ "lua/beck/internal/dsl/b.lua line 3: x.y" }, nested)
    assert.matches("beck%.internal%.dsl%.%a %-> .* %-> beck%.internal%.dsl%.%a", cycle(graph))
  end)
end)
