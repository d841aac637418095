-- Published assignments (runtime/cluster/assigncodec.c) through FFI: round trips of full messages
-- and deltas, the bridge from and to the assignor, validation, and thousands of random,
-- truncated and bit-flipped messages that must give an error or a valid assignment, never a
-- crash or a read out of bounds (run it under the ASan build too: make SAN=1 build/san/beck
-- && build/san/beck test spec/01-unit/31-assigncodec_spec.lua).
local ffi = require "ffi"
require "beck.internal.runtime" -- loads the cdefs
local C = ffi.C
local bit = require "bit"

local random = math.random

local errp = ffi.new("const char *[1]")
local bufp = ffi.new("char *[1]")
local lenp = ffi.new("size_t[1]")
local ibuf = ffi.new("int32_t[32]")

-- -- Helpers ---------------------------------------------------------------------------------

local function gc(ac) return ac ~= nil and ffi.gc(ac, C.bk_ffi_assigncodec_free) or nil end
local function err() return ffi.string(errp[0]) end

-- An assignment from a Lua description: { epoch=, base=, nodes = { [0]={id, rack, ep}, ... }
-- (nnodes entries, false for an empty slot), ntasks=, k=, active = {[t]=}, standby = {[t]={}} }.
local function build(d)
  local ac = gc(C.bk_ffi_assigncodec_new(d.nnodes, d.ntasks, d.k, d.epoch, d.base))
  assert(ac ~= nil)
  for i = 0, d.nnodes - 1 do
    local n = d.nodes[i]
    if n then assert(C.bk_ffi_assigncodec_set_node(ac, i, n[1], n[2], n[3], errp) == 0, err()) end
  end
  for t = 0, d.ntasks - 1 do
    local row = d.standby[t]
    for j, s in ipairs(row) do ibuf[j - 1] = s end
    assert(C.bk_ffi_assigncodec_set_task(ac, t, d.active[t], ibuf, #row) == 0)
  end
  return ac
end

-- The description of an assignment, read back through FFI.
local info = ffi.new("int32_t[3]")
local epochs = ffi.new("uint64_t[2]")
local rackp, epp = ffi.new("const char *[1]"), ffi.new("const char *[1]")
local function read(ac)
  C.bk_ffi_assigncodec_info(ac, info, info + 1, info + 2, epochs, epochs + 1)
  local d = { nnodes = info[0], ntasks = info[1], k = info[2], epoch = epochs[0],
              base = epochs[1], nodes = {}, active = {}, standby = {} }
  for i = 0, d.nnodes - 1 do
    local id = ffi.string(C.bk_ffi_assigncodec_node(ac, i, rackp, epp))
    d.nodes[i] = id ~= "" and { id, ffi.string(rackp[0]), ffi.string(epp[0]) } or false
  end
  for t = 0, d.ntasks - 1 do
    d.active[t] = C.bk_ffi_assigncodec_task(ac, t, ibuf)
    local row = {}
    for j = 0, d.k - 1 do
      if ibuf[j] >= 0 then row[#row + 1] = ibuf[j] end
    end
    d.standby[t] = row
  end
  return d
end

local function encode(ac)
  assert(C.bk_ffi_assigncodec_encode(ac, bufp, lenp, errp) == 0, err())
  local s = ffi.string(bufp[0], lenp[0])
  C.bk_ffi_assigncodec_buf_free(bufp[0])
  return s
end

local function delta(prev, nxt)
  assert(C.bk_ffi_assigncodec_delta(prev, nxt, bufp, lenp, errp) == 0, err())
  local s = ffi.string(bufp[0], lenp[0])
  C.bk_ffi_assigncodec_buf_free(bufp[0])
  return s
end

local function decode(s)
  local ac = gc(C.bk_ffi_assigncodec_decode(s, #s, errp))
  if not ac then return nil, err() end
  return ac
end

local function apply(prev, s)
  local ac = gc(C.bk_ffi_assigncodec_apply(prev, s, #s, errp))
  if not ac then return nil, err() end
  return ac
end

local function equal(a, b) return C.bk_ffi_assigncodec_equal(a, b) == 1 end

-- -- Random assignments ----------------------------------------------------------------------

local RACKS = { "", "a", "us-east-1b", "rack-with-a-long-name" }

-- Fills tasks of d from `from` on with valid random rows.
local function random_tasks(d, from)
  local live = {}
  for i = 0, d.nnodes - 1 do if d.nodes[i] then live[#live + 1] = i end end
  for t = from, d.ntasks - 1 do
    local used, row, a = {}, {}, -1
    if #live > 0 and random() < 0.9 then a = live[random(#live)]; used[a] = true end
    for _ = 1, random(0, d.k) do
      local s = live[random(math.max(#live, 1))]
      if s and not used[s] then used[s] = true; row[#row + 1] = s end
    end
    d.active[t], d.standby[t] = a, row
  end
end

local serial = 0
local function random_node()
  serial = serial + 1
  local ep = ("10.0.%d.%d:%d"):format(random(0, 255), random(0, 255), random(1, 65535))
  return { ("node-%d-%x"):format(serial, random(0, 0xffff)), RACKS[random(#RACKS)],
           random() < 0.9 and ep or "" }
end

local function random_desc()
  local base = random() < 0.1 and 0 or random(0, 1e9)
  local d = { base = base, epoch = base + random(1, 1000), nnodes = random(0, 40),
              ntasks = random(0, 300), k = random(0, 3), nodes = {}, active = {}, standby = {} }
  for i = 0, d.nnodes - 1 do
    d.nodes[i] = (i == d.nnodes - 1 or random() < 0.85) and random_node() or false
  end
  random_tasks(d, 0)
  return d
end

-- The next epoch: nodes leave (slot emptied), join (an empty slot or the end), change rack or
-- endpoint; tasks move; the task count or k may change.
local function mutate(d)
  local n = { base = d.epoch, epoch = d.epoch + random(1, 5), nnodes = d.nnodes, k = d.k,
              ntasks = d.ntasks, nodes = {}, active = {}, standby = {} }
  for i = 0, d.nnodes - 1 do n.nodes[i] = d.nodes[i] end
  for _ = 1, random(0, 3) do
    local r = random()
    if r < 0.3 and n.nnodes > 0 then
      n.nodes[random(0, n.nnodes - 1)] = false
    elseif r < 0.6 then
      local i = 0
      while i < n.nnodes and n.nodes[i] do i = i + 1 end
      n.nodes[i] = random_node()
      n.nnodes = math.max(n.nnodes, i + 1)
    elseif n.nnodes > 0 then
      local i = random(0, n.nnodes - 1)
      if n.nodes[i] then n.nodes[i] = { n.nodes[i][1], RACKS[random(#RACKS)], "10.9.9.9:1" } end
    end
  end
  while n.nnodes > 0 and not n.nodes[n.nnodes - 1] do
    n.nnodes = n.nnodes - 1
    n.nodes[n.nnodes] = nil
  end
  if random() < 0.2 then n.ntasks = random(0, 300) end
  if random() < 0.1 then n.k = random(0, 3) end
  -- Keep rows that still hold, then re-place some tasks at random.
  for t = 0, n.ntasks - 1 do
    local ok = t < d.ntasks and #d.standby[t] <= n.k
    if ok then
      for _, s in ipairs(d.standby[t]) do ok = ok and s < n.nnodes and n.nodes[s] end
      local a = d.active[t]
      ok = ok and (a == -1 or (a < n.nnodes and n.nodes[a]))
    end
    if ok and random() < 0.9 then
      n.active[t], n.standby[t] = d.active[t], d.standby[t]
    else
      n.active[t] = nil
    end
  end
  local saved = {}
  for t = 0, n.ntasks - 1 do saved[t] = n.active[t] end
  random_tasks(n, 0)
  for t = 0, n.ntasks - 1 do
    if saved[t] ~= nil then n.active[t] = saved[t] end
  end
  for t = 0, n.ntasks - 1 do
    if saved[t] ~= nil then
      n.standby[t] = (t < d.ntasks) and d.standby[t] or n.standby[t]
    end
  end
  for t = n.ntasks, d.ntasks - 1 do n.active[t], n.standby[t] = nil, nil end
  return n
end

-- A decoded assignment must be valid and survive a round trip of its own.
local function assert_valid(ac)
  assert(C.bk_ffi_assigncodec_validate(ac, errp) == 0, err())
  local again = assert(decode(encode(ac)))
  assert(equal(ac, again))
end

-- -- Specs -----------------------------------------------------------------------------------

describe("published assignments", function()
  it("decode what they encode", function()
    math.randomseed(31)
    for _ = 1, 500 do
      local d = random_desc()
      local ac = build(d)
      local bytes = encode(ac)
      local back = assert(decode(bytes))
      assert(equal(ac, back))
      assert.same(d, read(back))
    end
  end)

  it("carry 64-bit epochs and a version byte", function()
    local d = random_desc()
    d.base, d.epoch = 0xfffffffffffffffeULL, 0xffffffffffffffffULL
    local bytes = encode(build(d))
    assert.equal(2, bytes:byte(1)) -- version
    assert.equal(0, bytes:byte(2)) -- full
    local kind, ep = ffi.new("int32_t[1]"), ffi.new("uint64_t[2]")
    assert.equal(0, C.bk_ffi_assigncodec_peek(bytes, #bytes, kind, ep, ep + 1, errp))
    assert.equal(0, kind[0])
    assert(ep[0] == 0xffffffffffffffffULL and ep[1] == 0xfffffffffffffffeULL)
    assert.same(d, read(assert(decode(bytes))))
    assert.equal(-1, C.bk_ffi_assigncodec_peek(bytes, 1, kind, ep, ep + 1, errp))
  end)

  it("read version 1 (rolling upgrades) and write version 2 smaller", function()
    -- version 1, full, epoch 7, base 6; racks "ra", "rb"; nodes "node-1" (ra, "h:1"),
    -- an empty slot, "node-2" (rb, "h:2"); 3 tasks, k 1; rows as varints of slot + 1
    local v1 = "\1\0\7\6" .. "\2\2ra\2rb" .. "\3" .. "\6node-1\0\3h:1" .. "\0" ..
               "\6node-2\1\3h:2" .. "\3\1" .. "\1\3" .. "\3\1" .. "\0\0"
    local d = read(assert(decode(v1)))
    assert.same({ "node-1", "ra", "h:1" }, d.nodes[0])
    assert.is_false(d.nodes[1])
    assert.same({ "node-2", "rb", "h:2" }, d.nodes[2])
    assert.same({ [0] = 0, 2, -1 }, d.active)
    assert.same({ [0] = { 2 }, { 0 }, {} }, d.standby)
    local v2 = encode(build(d))
    assert.equal(2, v2:byte(1))
    assert.same(d, read(assert(decode(v2))))
    assert.is_true(#v2 < #v1, #v2 .. " vs " .. #v1)
    -- version 2 pads its packed rows with zero bits, and nothing else reads as them
    local last = v2:byte(#v2)
    local _, why = decode(v2:sub(1, -2) .. string.char(bit.bor(last, 0x80)))
    assert.matches("padding bits set", why)
  end)

  it("rebuild the next epoch from a delta", function()
    math.randomseed(32)
    for _ = 1, 500 do
      local d = random_desc()
      local prev = build(d)
      local nd = mutate(d)
      local nxt = build(nd)
      local bytes = delta(prev, nxt)
      assert.equal(1, bytes:byte(2)) -- delta
      local back = assert(apply(prev, bytes))
      assert(equal(nxt, back))
      assert.same(nd, read(back))
      -- Only on its base: any other epoch refuses it.
      local other = random_desc()
      other.epoch = d.epoch + 1000
      local _, why = apply(build(other), bytes)
      assert.matches("not based on the current epoch", why)
      -- And a full message is not a delta.
      _, why = apply(prev, encode(nxt))
      assert.matches("not a delta", why)
      _, why = decode(bytes)
      assert.matches("a delta", why)
    end
  end)

  it("send only what changed", function()
    math.randomseed(33)
    local d = random_desc()
    d.nnodes, d.ntasks, d.k = 40, 300, 1
    for i = 0, 39 do d.nodes[i] = random_node() end
    random_tasks(d, 0)
    local prev = build(d)
    local nd = mutate(d)
    nd.nodes, nd.nnodes, nd.ntasks, nd.k = d.nodes, 40, 300, 1
    for t = 0, 299 do nd.active[t], nd.standby[t] = d.active[t], d.standby[t] end
    nd.active[7] = (d.active[7] + 1) % 40
    nd.standby[7] = {}
    local small = delta(prev, build(nd))
    -- version, kind, two epochs (5 bytes each here), node and task counts, one row
    assert.is_true(#small <= 22, #small)
    assert.is_true(#encode(prev) > 10 * #small)
  end)

  it("publish the assignor's result with stable node slots", function()
    math.randomseed(34)
    local function members_of(b, list)
      for _, m in ipairs(list) do
        C.bk_ffi_assign_add_member(b, m[1], m[2], m[3], m[4])
      end
    end
    local list = {}
    for i = 1, 30 do
      list[i] = { "n" .. i, "r" .. (i % 3), "10.0.0." .. i .. ":8080", random(4) }
    end
    local T, K = 200, 1
    local b = ffi.gc(C.bk_ffi_assign_new(T, K), C.bk_ffi_assign_free)
    members_of(b, list)
    assert.equal(0, C.bk_ffi_assign_compute(b))
    local ac = gc(C.bk_ffi_assigncodec_from_assign(nil, b, 1, errp))
    assert(ac ~= nil, err())
    local d = read(ac)
    local act = C.bk_ffi_assign_active(b)
    for t = 0, T - 1 do assert.equal(list[act[t] + 1][1], d.nodes[d.active[t]][1]) end
    assert(equal(ac, assert(decode(encode(ac)))))

    -- Churn: n5 and n17 go, two new members come; the rest keep their slots.
    local slot = {}
    for i = 0, d.nnodes - 1 do slot[d.nodes[i][1]] = i end
    local next_list = {}
    for _, m in ipairs(list) do
      if m[1] ~= "n5" and m[1] ~= "n17" then next_list[#next_list + 1] = m end
    end
    next_list[#next_list + 1] = { "zz-new", "r1", "10.0.1.1:8080", 2 }
    next_list[#next_list + 1] = { "aa-new", "r2", "10.0.1.2:8080", 1 }
    local b2 = ffi.gc(C.bk_ffi_assign_new(T, K), C.bk_ffi_assign_free)
    members_of(b2, next_list)
    assert.equal(0, C.bk_ffi_assigncodec_to_prev(ac, b2))
    assert.equal(0, C.bk_ffi_assign_compute(b2))
    local moved = ffi.new("int32_t[4]")
    C.bk_ffi_assign_stats(b2, moved, moved + 1, moved + 2, moved + 3)
    assert.is_true(moved[2] > 0) -- the tasks of n5 and n17 were orphans: prev was read
    local ac2 = gc(C.bk_ffi_assigncodec_from_assign(ac, b2, 2, errp))
    assert(ac2 ~= nil, err())
    local d2 = read(ac2)
    for i = 0, d2.nnodes - 1 do
      local n = d2.nodes[i]
      if n and slot[n[1]] then assert.equal(slot[n[1]], i) end
    end
    -- Newcomers in id order into the freed slots, lowest first.
    local freed = { slot.n5, slot.n17 }
    table.sort(freed)
    assert.equal("aa-new", d2.nodes[freed[1]][1])
    assert.equal("zz-new", d2.nodes[freed[2]][1])
    assert.equal(d.nnodes, d2.nnodes)
    local bytes = delta(ac, ac2)
    assert(equal(ac2, assert(apply(ac, bytes))))
    assert.is_true(#bytes < #encode(ac2) / 4)
    -- An epoch must move forward.
    assert(C.bk_ffi_assigncodec_from_assign(ac2, b2, 2, errp) == nil)
    assert.matches("not after", err())
  end)

  it("refuse to encode an invalid assignment", function()
    local function invalid(d, what)
      assert.equal(-1, C.bk_ffi_assigncodec_encode(build(d), bufp, lenp, errp))
      assert.matches(what, err())
    end
    local function base()
      return { epoch = 2, base = 1, nnodes = 2, ntasks = 1, k = 1,
               nodes = { [0] = { "a", "r", "e" }, { "b", "r", "e" } },
               active = { [0] = 0 }, standby = { [0] = { 1 } } }
    end
    encode(build(base()))
    local d = base(); d.epoch = 1; invalid(d, "not after")
    d = base(); d.nodes[1] = { "a", "r", "e" }; invalid(d, "two slots")
    d = base(); d.standby[0] = { 0 }; invalid(d, "two replicas")
    d = base(); d.active[0] = 2; invalid(d, "not a node")
    d = base(); d.nnodes = 3; invalid(d, "last node slot is empty")
    d = base(); d.nnodes = 3; d.nodes[1] = false; d.nodes[2] = { "c", "r", "e" }
    invalid(d, "not a node")
    d = base(); d.nnodes = 3; d.nodes[1] = false; d.nodes[2] = { "c", "r", "e" }
    d.standby[0] = { 2 }
    encode(build(d)) -- an empty slot inside the table is fine
    d = base(); d.k = 2; d.standby[0] = { -1, 1 }; invalid(d, "after an empty")
  end)

  it("reject or decode validly thousands of damaged messages", function()
    math.randomseed(35)
    local valid, refused = 0, 0
    local function try(bytes, prev)
      local ac = decode(bytes)
      if ac then valid = valid + 1; assert_valid(ac) else refused = refused + 1 end
      if prev then
        ac = apply(prev, bytes)
        if ac then valid = valid + 1; assert_valid(ac) else refused = refused + 1 end
      end
    end
    local samples = {}
    for _ = 1, 40 do
      local d = random_desc()
      local prev = build(d)
      samples[#samples + 1] = { encode(prev), nil }
      samples[#samples + 1] = { delta(prev, build(mutate(d))), prev }
    end
    for _, s in ipairs(samples) do
      local bytes, prev = s[1], s[2]
      -- Every truncation.
      for n = 0, #bytes - 1 do try(bytes:sub(1, n), prev) end
      -- Bit flips, byte changes, insertions.
      for _ = 1, 60 do
        local b = { bytes:byte(1, -1) }
        for _ = 1, random(3) do
          local i = random(#b)
          local r = random()
          if r < 0.5 then b[i] = bit.bxor(b[i], bit.lshift(1, random(0, 7)))
          elseif r < 0.8 then b[i] = random(0, 255)
          else table.insert(b, i, random(0, 255)) end
        end
        try(string.char(unpack(b)), prev)
      end
    end
    -- Random bytes, with a valid header now and then to get past it.
    local prev = build(random_desc())
    for _ = 1, 3000 do
      local b = {}
      for i = 1, random(0, 64) do b[i] = random(0, 255) end
      if random() < 0.6 and #b >= 2 then b[1] = 1; b[2] = random(0, 1) end
      try(string.char(unpack(b)), prev)
    end
    -- Counts that promise far more than the message holds.
    local huge = "\1\0\2\1" .. "\255\255\255\255\255\255\255\255\255\1"
    try(huge, prev)
    try("\1\0\2\1\0\0\255\255\255\7\1", prev)
    try("\1\0\2\1\0\1\0\255\255\255\255\15", prev)
    try("\1\1\2\1\255\255\3\0\0\0\0", prev)
    assert.is_true(refused > 10000, refused)
    assert.is_true(valid > 0) -- some damage still reads as an assignment: it is valid
  end)
end)
