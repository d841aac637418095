-- beck.internal.layout: the window layout of store keys, shared by window stores (the
-- DSL's windows and joins: beck.internal.dsl.window) and versioned stores
-- (beck.internal.versioned). A key is [4-byte big-endian length][record key][8-byte
-- big-endian time][rest]; runtime/base/keys.c files it under its record key's key group, so
-- state moves with its key. Each entry may have an index entry [ff ff ff ff][time][length]
-- [key][rest] (no record key has length 2^32-1), so that expiry is one scan of the index
-- up to a cutoff.
local bit = require "bit"

local band, rshift = bit.band, bit.rshift
local char, byte, sub = string.char, string.byte, string.sub
local floor = math.floor

local M = {}

local IDX = "\255\255\255\255"
local TOP = "\255\255\255\255\255\255\255\255" -- above every 8-byte time below 2^53
M.IDX, M.TOP = IDX, TOP

local function be32(n)
  return char(band(rshift(n, 24), 255), band(rshift(n, 16), 255), band(rshift(n, 8), 255),
              band(n, 255))
end

-- 8 bytes big-endian of a whole number in [0, 2^53).
local function be64(n)
  local hi = floor(n / 4294967296)
  local lo = n - hi * 4294967296
  return char(band(rshift(hi, 24), 255), band(rshift(hi, 16), 255), band(rshift(hi, 8), 255),
              band(hi, 255), band(rshift(lo, 24), 255), band(rshift(lo, 16), 255),
              band(rshift(lo, 8), 255), band(lo, 255))
end

local function dec32(s, i)
  local a, b, c, d = byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function dec64(s, i)
  return dec32(s, i) * 4294967296 + dec32(s, i + 4)
end

M.be32, M.be64, M.dec32, M.dec64 = be32, be64, dec32, dec64

-- prefix(serialized key): the part of a store key before the time.
local function prefix(sk)
  return be32(#sk) .. sk
end
M.prefix = prefix

-- index(p, t8, rest): the index entry of p .. t8 .. rest.
local function index(p, t8, rest)
  return IDX .. t8 .. p .. rest
end
M.index = index

-- entry_of(ik) -> the store key an index entry stands for, and its record key's length.
local function entry_of(ik)
  local len = dec32(ik, 13)
  return sub(ik, 13, 16 + len) .. sub(ik, 5, 12) .. sub(ik, 17 + len), len
end
M.entry_of = entry_of

-- expire(st, cutoff): deletes every entry (and its index entry) whose time
-- is below cutoff. Keys are gathered first: a store takes no writes while
-- an iterator on it is open.
function M.expire(st, cutoff)
  if cutoff <= 0 then return 0 end
  local keys, n = {}, 0
  for k in st:range(IDX .. be64(0), IDX .. be64(cutoff)) do
    n = n + 1
    keys[n] = k
  end
  for i = 1, n do
    local ik = keys[i]
    st:delete((entry_of(ik)))
    st:delete(ik)
  end
  return n
end


return M
