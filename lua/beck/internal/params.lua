-- beck.internal.params: whether a Lua function can read one of its
-- parameters, from its LuaJIT bytecode (jit.util).
--
-- The record path uses it to skip making the record's value into a Lua
-- string when no processor its source feeds could look at it: a string of a
-- 100-byte value costs about as much as the rest of a count by key (making
-- and interning it, then sweeping it), and a count never reads the value.
-- The answer errs one way only: "no" means that no instruction of the
-- function reads the parameter's slot, so passing nil instead is invisible
-- (short of the debug library); anything this module does not understand
-- answers "yes".
local jutil = require "jit.util"
local bit = require "bit"

local band, shr = bit.band, bit.rshift
local funcinfo, funcbc = jutil.funcinfo, jutil.funcbc

local M = {}

-- Operand modes of lj_bc.h (BCM*), as jit.util.funcbc returns them.
local VAR, BASE, RBASE, FUNC = 3, 2, 4, 12

-- Opcodes whose base operand A is a range of slots they read, and the first
-- slot of that range relative to A (lj_bc.h; the VM's own reference). Every
-- other opcode with a base operand either writes its range (KNIL, VARG) or
-- names where upvalues are closed (JMP, LOOP, UCLO, RET0), which reads
-- nothing; an opcode missing from both lists makes the answer "yes".
local READS_FROM = {
  CALL = 0, CALLM = 0, CALLT = 0, CALLMT = 0, RETM = 0,
  FORI = 0, JFORI = 0, FORL = 0, IFORL = 0, JFORL = 0,
  ITERL = 0, IITERL = 0, JITERL = 0,
  TSETM = -1, ITERC = -3, ITERN = -3, ISNEXT = -3,
}
local READS_NOTHING = {
  KNIL = true, VARG = true, JMP = true, LOOP = true, ILOOP = true, JLOOP = true,
  UCLO = true, RET0 = true,
}

local bcnames
local function opname(ins)
  if bcnames == nil then
    local ok, vmdef = pcall(require, "jit.vmdef")
    bcnames = ok and vmdef.bcnames or false
  end
  if not bcnames then return nil end
  local i = 6 * band(ins, 0xff)
  return (bcnames:sub(i + 1, i + 6):gsub(" +$", ""))
end

-- reads(fn, n) -> whether fn may read its n-th parameter (1-based).
function M.reads(fn, n)
  if type(fn) ~= "function" then return true end
  local info = funcinfo(fn)
  if info.ffid or not info.bytecodes or info.isvararg then return true end
  if info.params < n then return false end
  local slot = n - 1
  for pc = 1, info.bytecodes - 1 do
    local ins, m = funcbc(fn, pc)
    if not ins then break end
    local op = opname(ins)
    if op == nil then return true end
    -- a closure may capture the parameter as an upvalue
    if op == "FNEW" then return true end
    local ma, mb, mc = band(m, 7), shr(band(m, 15 * 8), 3), shr(band(m, 15 * 128), 7)
    local a, d = band(shr(ins, 8), 0xff), shr(ins, 16)
    local b, c = shr(ins, 24), d
    if mb ~= 0 then c = band(d, 0xff) end
    if READS_NOTHING[op] then
      -- writes its range, or closes upvalues
    elseif op == "CAT" then -- reads slots B to C
      if b <= slot and slot <= c then return true end
    elseif op == "RET1" then -- returns slot A
      if a == slot then return true end
    elseif op == "RET" then -- returns slots A to A + D - 2
      if a <= slot and slot <= a + d - 2 then return true end
    else
      if (ma == VAR and a == slot) or (mb == VAR and b == slot) or (mc == VAR and c == slot) then
        return true
      end
      if ma == BASE or ma == RBASE then
        local from = READS_FROM[op]
        if from == nil or a + from <= slot then return true end
      end
      -- no opcode of this VM but CAT, KNIL and FNEW has these
      if mb == BASE or mb == RBASE or mc == BASE or mc == RBASE or mc == FUNC then
        return true
      end
    end
  end
  return false
end

return M
