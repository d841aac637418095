-- The DSL's per-record closures compile with LuaJIT's JIT (spec/01-unit/
-- 02-hotpath_spec.lua for the processor API): a stateless pipeline fed the
-- way runtime/engine/thread.c feeds records, with a sink that stays in Lua. No
-- trace may abort on something LuaJIT cannot compile (NYI, a C function).
-- A chain of processors calls Ctx.forward at every depth, which LuaJIT
-- records as (pseudo-)recursion: those recorder heuristics are allowed here,
-- and the record loop is not asserted to be a loop trace (it is one for a
-- chain of two, in 02-hotpath_spec.lua).
local ffi = require "ffi"
local beck = require "beck"
local runtime = require "beck.internal.runtime"

local function make_io(n)
  local recs = ffi.new("bk_rec_t[?]", n)
  local keep = {}
  for i = 0, n - 1 do
    local k, v = "key-" .. (i % 97), "the quick brown fox " .. i
    keep[#keep + 1] = k
    keep[#keep + 1] = v
    recs[i].key, recs[i].key_len = k, #k
    recs[i].value, recs[i].value_len = v, #v
    recs[i].task, recs[i].topic, recs[i].partition = 0, 0, 0
    recs[i].offset, recs[i].timestamp = i, 1700000000000 + i
  end
  local io = ffi.new("bk_io_t")
  io.recs, io.count, io.next_wall_ms = recs, n, -1
  keep.recs = recs -- io.recs does not keep the array alive
  return io, keep
end

describe("the DSL's record path", function()
  it("compiles filter, map_values, flat_map, select_key and to() without NYI", function()
    local jv = require "jit.v"
    local logfile = os.tmpname()
    local app = beck.app { id = "dsl-hot" }
    app:stream("in")
       :filter(function(_, v) return #v > 3 end)
       :map_values(function(v) return v:upper() end)
       :flat_map(function(k, v, emit)
         emit(k, v)
         emit(v, k)
       end)
       :select_key(function(k) return k end)
       :to("out")
    local written = 0
    local env = {
      store_ptr = function() return nil end,
      sink = function() return function(k, v) written = written + #k + #v end end,
      headers = function() return {} end,
      now = function() return 0 end,
    }
    local bio, keep = make_io(1000)
    local fns = runtime.new(app, bio, nil, { { 0, 0 } }, 0, env)
    fns.init()
    local run = fns.run
    jit.flush()
    jv.on(logfile)
    for _ = 1, 50 do run(0) end
    jv.off()
    local f = assert(io.open(logfile))
    local report = f:read("*a")
    f:close()
    os.remove(logfile)
    assert.is_table(keep)
    assert.is_true(written > 0)
    assert.matches("%[TRACE%s+%d+ [%w%-_]+%.lua:%d+", report)
    local allowed = { "^leaving loop in root trace", "^loop unroll limit", "^down%-recursion",
                      "^up%-recursion", "^inner loop in root trace",
                      "^call unroll limit reached" }
    for reason in report:gmatch("TRACE %-%-%-[^\n]*%-%- ([^\n]*)%]") do
      local ok = false
      for _, p in ipairs(allowed) do ok = ok or reason:find(p) ~= nil end
      if not ok then error("a trace aborted (" .. reason .. "):\n" .. report) end
    end
    assert.is_nil(report:find("NYI", 1, true))
  end)
end)
