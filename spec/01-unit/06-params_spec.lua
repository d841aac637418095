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
