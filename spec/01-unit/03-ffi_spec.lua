-- The FFI boundary: the declarations Lua uses are cut from runtime/base/ffi.h at
-- build time (beck.internal.cdef); every function declared there must be
-- exported by the binary, and the record layout must be the header's.
local ffi = require "ffi"
require "beck.internal.runtime" -- loads the cdefs
local cdef = require "beck.internal.cdef"

describe("runtime/base/ffi.h", function()
  it("is the source of beck.internal.cdef", function()
    local f = assert(io.open("runtime/base/ffi.h"))
    local header = f:read("*a")
    f:close()
    local cut = header:match("/%* BK_FFI_CDEF_BEGIN %*/\n(.-)/%* BK_FFI_CDEF_END %*/")
    assert.is_string(cut)
    assert.equal(cut, cdef:gsub("^\n", ""))
  end)

  it("exports every function it declares", function()
    local names = {}
    for name in cdef:gmatch("(bk_ffi_[%w_]+)%s*%(") do
      names[#names + 1] = name
      local ok, err = pcall(function() return ffi.C[name] end)
      assert(ok, "not exported by the binary: " .. name .. " (" .. tostring(err) .. ")")
    end
    assert.is_true(#names >= 5)
  end)

  -- What bin/beck exports is what beck's Lua calls: the entry points only specs call
  -- (runtime/base/ffi_spec.h) are linked into bin/beck-spec alone.
  it("is all bin/beck exports, and beck's Lua calls each of them", function()
    local p = io.popen("nm -D --defined-only " .. require("spec.helpers").beck_bin() ..
                       " 2>&1")
    local exported, n = {}, 0
    for line in p:lines() do
      -- beck's own (a sanitizer's runtime, SAN=1, exports its options too)
      local name = line:match("^%x+ [TtDdBbRr] (bk_[%w_]+)$")
      if name then exported[name] = true; n = n + 1 end
    end
    p:close()
    assert.is_true(n >= 5, "nm -D found nothing")
    local lua = io.popen("cat $(find lua -name '*.lua')"):read("*a")
    local declared = {}
    for name in cdef:gmatch("(bk_ffi_[%w_]+)%s*%(") do declared[name] = true end
    local bad = {}
    for name in pairs(exported) do
      if not declared[name] then
        bad[#bad + 1] = name .. ": exported, not declared in ffi.h"
      elseif not lua:find(name, 1, true) then
        bad[#bad + 1] = name .. ": exported, called by no Lua of lua/"
      end
    end
    for name in pairs(declared) do
      if not exported[name] then bad[#bad + 1] = name .. ": declared, not exported" end
    end
    table.sort(bad)
    assert.equal("", table.concat(bad, "\n"))
  end)

  it("lays out bk_rec_t as C does", function()
    assert.equal(56, ffi.sizeof("bk_rec_t")) -- _Static_assert in thread.c
    assert.equal(40, ffi.offsetof("bk_rec_t", "offset"))
    assert.equal(48, ffi.offsetof("bk_rec_t", "timestamp"))
  end)

  it("gives Lua the wall clock", function()
    local now = tonumber(ffi.C.bk_ffi_clock_ms())
    assert.is_true(math.abs(now - os.time() * 1000) < 2000)
  end)
end)
