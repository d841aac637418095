-- beck.internal.params reads LuaJIT bytecode to tell whether a function can read a
-- parameter; the record path then skips making the value string no processor could read.
-- A wrong "no" would hand a processor nil instead of its value, so every way a function
-- can touch a parameter must answer "yes".
local params = require "beck.internal.params"
local ffi = require "ffi"

local up
local function uses(fn) return params.reads(fn, 3) end

describe("params.reads", function()
  it("says no when the parameter is not there or never read", function()
    assert.is_false(uses(function(ctx, k, v) end)) -- luacheck: ignore
    assert.is_false(uses(function(ctx, k) end)) -- luacheck: ignore
    assert.is_false(uses(function(ctx, k, v) -- luacheck: ignore
      local n = tonumber(ctx.counts:get(k) or "0") + 1
      local s = tostring(n)
      ctx.counts:put(k, s)
      ctx:forward(k, s)
    end))
    assert.is_false(uses(function(ctx, k, v) -- luacheck: ignore
      for i = 1, 3 do ctx:forward(k, tostring(i)) end
      local t = { k, ctx:f() }
      for _, x in pairs(t) do ctx:forward(k, x) end
      return k .. "!"
    end))
  end)

  it("says yes for every way of reading it", function()
    local cases = {
      function(ctx, k, v) ctx:forward(k, v) end,
      function(ctx, k, v) return v end,
      function(ctx, k, v) return ctx, k, v end,
      function(ctx, k, v) return #v end, -- luacheck: ignore
      function(ctx, k, v) local t = { v } return t end,
      function(ctx, k, v) local t = { k, v, ctx:f() } return t end,
      function(ctx, k, v) return function() return v end end,
      function(ctx, k, v) return k .. v end,
      function(ctx, k, v) return v .. k end,
      function(ctx, k, v) if v then ctx:forward(k, "x") end end,
      function(ctx, k, v) if v == "x" then ctx:forward(k, "x") end end,
      function(ctx, k, v) if v < "x" then ctx:forward(k, "x") end end,
      function(ctx, k, v) up = v end,
      function(ctx, k, v) ctx[v] = 1 end,
      function(ctx, k, v) ctx.x = v end,
      function(ctx, k, v) return ctx[v] end,
      function(ctx, k, v) return v.x end,
      function(ctx, k, v) return v:sub(1, 2) end,
      function(ctx, k, v) ctx.store:put(k, v) end,
      function(ctx, k, v) for _, x in pairs(v) do ctx:forward(k, x) end end,
      function(ctx, k, v) for i = v, 3 do ctx:forward(k, i) end end,
      function(ctx, k, v) local a = not v return a end,
      function(ctx, k, v) return -v end,
      function(ctx, k, v) return v + 1 end,
      function(ctx, k, v) return 1 - v end,
      function(ctx, k, v) local x = v; ctx:forward(k, x) end,
      function(ctx, k, v) return select(1, v) end,
      function(ctx, k, v) return (v) end,
      function(ctx, ...) return select(2, ...) end,
      function(...) return ... end,
      print, -- a builtin
      ffi.string,
      setmetatable({}, { __call = function(_, ctx, k, v) return v end }),
    }
    for i, fn in ipairs(cases) do
      assert(uses(fn), "case " .. i .. " reads its value")
    end
    assert.is_nil(up)
  end)

  it("answers for any parameter", function()
    assert.is_true(params.reads(function(a, b) return a end, 1))
    assert.is_false(params.reads(function(a, b) return a end, 2)) -- luacheck: ignore
    assert.is_true(params.reads(function(a, b) return b end, 2))
    assert.is_false(params.reads(function(a) return a end, 2))
  end)
end)

-- A processor that only passes its key or value on to ctx:forward gets a stand-in for the
-- record's bytes, which only a sink resolves: any other use must answer false, or the
-- stand-in reaches code that reads it.
describe("params.forwards_only", function()
  local function fwd(fn, n) return params.forwards_only(fn, n or 3) end

  it("says yes when the parameter only goes to ctx:forward, in its place", function()
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(k, v) end))
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(k, v) end, 2))
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(k, v, "left") end))
    assert.is_true(fwd(function(ctx, k, v) return ctx:forward(k, v) end))
    assert.is_true(fwd(function(ctx, k, v) ctx.forward(ctx, k, v) end)) -- the same bytecode
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(k, (v)) end))
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(k, k and v) end)) -- v or nil: both fine
    assert.is_true(fwd(function(ctx, k, v) if k ~= "x" then ctx:forward(k, v) end end))
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(k, v, "a"); ctx:forward(k, v, "b") end))
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(k .. "!", v) end))
    assert.is_true(fwd(function(ctx, k, v) ctx:forward(tostring(#k), v) end))
  end)

  it("says no for every other use", function()
    local cases = {
      function(ctx, k, v) end, -- luacheck: ignore (never read: nothing to forward)
      function(ctx, k, v) ctx:forward(v, k) end,
      function(ctx, k, v) ctx:forward(k, v .. "") end,
      function(ctx, k, v) ctx:forward_at(1, k, v) end,
      function(ctx, k, v) ctx:emit(k, v) end,
      function(ctx, k, v) ctx.other:forward(k, v) end,
      function(ctx, k, v) local x = v; ctx:forward(k, x) end,
      function(ctx, k, v) ctx:forward(k, v); print(v) end,
      function(ctx, k, v) ctx:forward(k, v, #v) end,
      function(ctx, k, v) ctx:forward(k, v, v) end,
      function(ctx, k, v) ctx:forward(k, v, tostring(v)) end,
      function(ctx, k, v) ctx:forward(k, v or "") end,
      function(ctx, k, v) ctx = ctx.parent; ctx:forward(k, v) end,
      function(ctx, k, v) ctx:forward(k, v); return function() return v end end,
      function(ctx, k, v) ctx.store:put(k, v); ctx:forward(k, v) end,
      function(ctx, ...) ctx:forward(...) end,
      print,
      setmetatable({}, { __call = function(_, ctx, k, v) ctx:forward(k, v) end }),
    }
    for i, fn in ipairs(cases) do
      assert(not fwd(fn), "case " .. i .. " does more than forward its value")
    end
    assert.is_false(fwd(function(ctx, k, v) ctx:forward(k, v) end, 1))
    assert.is_false(fwd(function(ctx, k, v) ctx:forward(k:upper(), v) end, 2))
    assert.is_false(fwd(function(ctx, k, v) ctx:forward(k, v); ctx.seen[k] = true end, 2))
  end)
end)
