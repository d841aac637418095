-- A task's life (runtime/engine/tasklife.c): docs/architecture.md's table of states and the
-- moves between them is the code's, state for state and move for move, and the moves make
-- sense: every state but free leaves to free, a task reaches live only through opening, and
-- only a running one is parked.
local ffi = require "ffi"
local helpers = require "spec.helpers"
local C = ffi.C

local function code_states()
  local list = {}
  for i = 0, C.bk_ffi_tasklife_states() - 1 do
    list[#list + 1] = ffi.string(C.bk_ffi_tasklife_name(i))
  end
  return list
end

-- The doc's table: { [state] = { to = {state = true}, order = n } }
local function doc_table()
  local text = helpers.read_file("docs/architecture.md")
  local section = text:match("\n## A task's life\n(.-)\n## ")
  assert.is_string(section, "docs/architecture.md has no section \"A task's life\"")
  local states, n = {}, 0
  for name, what, to in section:gmatch("\n| ([%a-]+) | ([^|]+) | ([^|]+) |") do
    if name ~= "state" then
      n = n + 1
      local set = {}
      for s in to:gmatch("[%a-]+") do set[s] = true end
      states[name] = { to = set, order = n, what = what }
    end
  end
  return states
end

describe("a task's life", function()
  it("has the states and moves docs/architecture.md's table shows, no more, no fewer", function()
    local names, doc = code_states(), doc_table()
    local index = {}
    for i, name in ipairs(names) do index[name] = i - 1 end
    for name in pairs(doc) do
      assert.is_not_nil(index[name], "the doc names a state the code has not: " .. name)
    end
    for _, name in ipairs(names) do
      assert.is_table(doc[name], "the doc's table misses state " .. name)
    end
    for _, from in ipairs(names) do
      for _, to in ipairs(names) do
        local code = C.bk_ffi_tasklife_allowed(index[from], index[to]) == 1
        local says = doc[from].to[to] == true
        assert.equal(code, says, string.format("%s -> %s: the code %s, the doc %s", from, to,
                                               code and "allows it" or "does not",
                                               says and "lists it" or "does not"))
      end
    end
  end)

  it("leaves every state to free, reaches live only through opening, parks running tasks only",
     function()
    local names = code_states()
    local index = {}
    for i, name in ipairs(names) do index[name] = i - 1 end
    local function can(a, b) return C.bk_ffi_tasklife_allowed(index[a], index[b]) == 1 end
    for _, s in ipairs(names) do
      if s ~= "free" then assert.is_true(can(s, "free"), s .. " cannot leave") end
      assert.is_false(can(s, s), s .. " -> itself is no move")
    end
    -- live is reached from opening, building, restoring (its job) and sealing (its seal
    -- done) only
    for _, s in ipairs(names) do
      local into_live = can(s, "live")
      local expected = s == "opening" or s == "building" or s == "restoring" or s == "sealing"
      assert.equal(expected, into_live, s .. " -> live")
    end
    -- parked only from a running state (live to drained); opened again only from free or
    -- parked
    local running = { live = true, sealing = true, held = true, draining = true,
                      checkpointing = true, drained = true }
    for _, s in ipairs(names) do
      assert.equal(running[s] == true, can(s, "parked"), s .. " -> parked")
      assert.equal(s == "free" or s == "parked", can(s, "opening"), s .. " -> opening")
    end
    -- out of range is no move
    assert.equal(0, C.bk_ffi_tasklife_allowed(-1, 0))
    assert.equal(0, C.bk_ffi_tasklife_allowed(0, #names))
    assert.equal("?", ffi.string(C.bk_ffi_tasklife_name(#names)))
  end)
end)
