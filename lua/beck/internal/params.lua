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

-- One instruction: { op = name, a, b, c, d, ma, mb, mc }, or nil past the end.
local function decode(fn, pc)
  local ins, m = funcbc(fn, pc)
  if not ins then return nil end
  local op = opname(ins)
  local ma, mb, mc = band(m, 7), shr(band(m, 15 * 8), 3), shr(band(m, 15 * 128), 7)
  local a, d = band(shr(ins, 8), 0xff), shr(ins, 16)
  local b, c = shr(ins, 24), d
  if mb ~= 0 then c = band(d, 0xff) end
  return { op = op, a = a, b = b, c = c, d = d, ma = ma, mb = mb, mc = mc }
end

-- Whether instruction i may read slot `slot`; an instruction this module does not know
-- (op nil) may.
local function reads_slot(i, slot)
  local op, a, b, c, d, ma, mb, mc = i.op, i.a, i.b, i.c, i.d, i.ma, i.mb, i.mc
  if op == nil then return true end
  -- a closure may capture the slot as an upvalue
  if op == "FNEW" then return true end
  if READS_NOTHING[op] then
    return false -- writes its range, or closes upvalues
  elseif op == "CAT" then -- reads slots B to C
    return b <= slot and slot <= c
  elseif op == "RET1" then -- returns slot A
    return a == slot
  elseif op == "RET" then -- returns slots A to A + D - 2
    return a <= slot and slot <= a + d - 2
  end
  if (ma == VAR and a == slot) or (mb == VAR and b == slot) or (mc == VAR and c == slot) then
    return true
  end
  if ma == BASE or ma == RBASE then
    local from = READS_FROM[op]
    if from == nil or a + from <= slot then return true end
  end
  -- no opcode of this VM but CAT, KNIL and FNEW has these
  return mb == BASE or mb == RBASE or mc == BASE or mc == RBASE or mc == FUNC
end

-- reads(fn, n) -> whether fn may read its n-th parameter (1-based).
function M.reads(fn, n)
  if type(fn) ~= "function" then return true end
  local info = funcinfo(fn)
  if info.ffid or not info.bytecodes or info.isvararg then return true end
  if info.params < n then return false end
  for pc = 1, info.bytecodes - 1 do
    local i = decode(fn, pc)
    if not i then break end
    if reads_slot(i, n - 1) then return true end
  end
  return false
end

-- Where a method call's first argument (self) lands above its base: 2 with LuaJIT's
-- two-slot frames (64-bit GC references), else 1. Read off a probe rather than assumed.
local self_offset
local function method_self_offset()
  if self_offset == nil then
    self_offset = false
    local probe = function(ctx) ctx:forward() end
    local base, self_slot
    for pc = 1, funcinfo(probe).bytecodes - 1 do
      local i = decode(probe, pc)
      if not i then break end
      if i.op == "TGETS" then base = i.a end
      if i.op == "MOV" and i.d == 0 then self_slot = i.a end
    end
    if base and self_slot then self_offset = self_slot - base end
  end
  return self_offset
end

local DST = 1

-- Whether the MOV at `pc` (of slot n - 1 into a call's argument) passes the slot as the
-- n-th argument of `ctx:forward(...)` with ctx the first parameter: the slot it fills is
-- that argument of the next call at or below it, whose function slot was last filled by
-- TGETS from slot 0 with the key "forward", and nothing in between reads or refills it.
local function feeds_forward(fn, pc, n, nbc)
  local off = method_self_offset()
  if not off then return false end
  local mov = decode(fn, pc)
  local dst = mov.a
  local base = dst - (n - 1) - off
  if base < 0 then return false end
  -- the call that takes dst
  local call
  for q = pc + 1, nbc - 1 do
    local i = decode(fn, q)
    if not i or i.op == nil then return false end
    if (i.ma == BASE or i.ma == RBASE) and i.a <= dst then
      if i.a == base and (i.op == "CALL" or i.op == "CALLM" or i.op == "CALLT" or
                          i.op == "CALLMT") then
        call = q
      end
      break
    end
    if reads_slot(i, dst) or (i.ma == DST and i.a == dst) then return false end
  end
  if not call then return false end
  -- the function slot: last filled before the MOV by TGETS base, 0, "forward"
  for q = pc - 1, 1, -1 do
    local i = decode(fn, q)
    if not i or i.op == nil then return false end
    if (i.ma == DST and i.a == base) or ((i.ma == BASE or i.ma == RBASE) and i.a <= base) then
      return i.op == "TGETS" and i.b == 0 and jutil.funck(fn, -i.c - 1) == "forward"
    end
  end
  return false
end

-- forwards_only(fn, n) -> whether fn reads its n-th parameter (n >= 2) only to pass it on
-- unchanged as the n-th argument of ctx:forward(...) on its first parameter, as in
-- `process = function(ctx, k, v) ctx:forward(k, v) end`, and never assigns that first
-- parameter. The record path then hands such a processor a stand-in for the record's
-- key or value, which a sink resolves to the record's own bytes: no Lua string made.
-- Errs one way only: anything else answers false.
function M.forwards_only(fn, n)
  if type(fn) ~= "function" or n < 2 then return false end
  local info = funcinfo(fn)
  if info.ffid or not info.bytecodes or info.isvararg or info.params < n then return false end
  local nbc, slot, any = info.bytecodes, n - 1, false
  for pc = 1, nbc - 1 do
    local i = decode(fn, pc)
    if not i then break end
    if i.op == nil or i.op == "FNEW" then return false end
    if (i.ma == DST and i.a == 0) or (i.op == "KNIL" and i.a == 0) then return false end
    if reads_slot(i, slot) then
      if i.op ~= "MOV" or not feeds_forward(fn, pc, n, nbc) then return false end
      any = true
    end
  end
  return any
end

return M
