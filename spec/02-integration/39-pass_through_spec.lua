-- A key or value that processors only pass on to ctx:forward is never made into a Lua
-- string: the sink writes the input record's own bytes (docs/performance.md). What comes
-- out must be the input, byte for byte: binary values, empty and null keys and values,
-- headers, next to a source of the same node whose children read the value.
local helpers = require "spec.helpers"

local N, PARTITIONS = 3000, 4

-- Record i of an input: every fourth value binary (zero bytes and 0xff included), some
-- empty, some null (tombstones), some keys empty or null; headers on every fifth.
local function make_input(tag)
  local recs = {}
  for i = 1, N do
    local key, value = tag .. "-k" .. i, tag .. "-v" .. i .. string.rep("x", i % 50)
    if i % 4 == 0 then value = tag .. i .. "\0\1\255" .. string.char(i % 256) end
    if i % 97 == 0 then value = "" end
    if i % 89 == 0 then value = nil end
    if i % 83 == 0 then key = "" end
    if i % 79 == 0 then key = nil end
    local r = { key = key, value = value }
    if i % 5 == 0 then r.headers = { { "h", "n" .. i }, { "bin", "\1\2" } } end
    recs[i] = r
  end
  return recs
end

-- A record as text, to compare lists of records in any order.
local function show(r)
  local hs = {}
  for _, h in ipairs(r.header_list or r.headers or {}) do
    hs[#hs + 1] = string.format("%q=%q", h[1], tostring(h[2]))
  end
  return string.format("%s|%s|%s", r.key == nil and "<nil>" or string.format("%q", r.key),
                       r.value == nil and "<nil>" or string.format("%q", r.value),
                       table.concat(hs, ","))
end

local function same_records(want, got, what)
  local a, b = {}, {}
  for i, r in ipairs(want) do a[i] = show(r) end
  for i, r in ipairs(got) do b[i] = show(r) end
  table.sort(a)
  table.sort(b)
  assert.equal(#a, #b, what .. ": record count")
  for i = 1, #a do
    if a[i] ~= b[i] then error(string.format("%s: %s expected, got %s", what, a[i], b[i])) end
  end
end

describe("records passed through untouched", function()
  after_each(helpers.cleanup)

  it("come out byte for byte, next to sources whose children read them", function()
    helpers.with_timeout(120, function()
      local broker = helpers.start_broker()
      local bs = broker.bootstrap
      for _, t in ipairs { "pt-in", "pt-in2", "pt-same", "pt-even", "pt-fan", "pt-up" } do
        assert.is_true(broker:create_topic(t, PARTITIONS))
      end
      local in1, in2 = make_input("a"), make_input("b")
      helpers.produce(bs, "pt-in", in1)
      helpers.produce(bs, "pt-in2", in2)
      local node = helpers.start_node("spec/fixtures/pass_through.lua", { "-b", bs })
      local want_even, want_up = {}, {}
      for _, r in ipairs(in1) do
        if r.key ~= nil and #r.key % 2 == 0 then want_even[#want_even + 1] = r end
      end
      for _, r in ipairs(in2) do
        want_up[#want_up + 1] = { key = r.key, value = r.value and r.value:upper(),
                                  headers = r.headers }
      end
      helpers.eventually(function()
        assert(node:alive(), "the node died:\n" .. node:log())
        local n = helpers.count(bs, "pt-same") + helpers.count(bs, "pt-even") +
                  helpers.count(bs, "pt-fan") + helpers.count(bs, "pt-up")
        return n >= 3 * N + #want_even, n
      end, 60, 0.5)
      same_records(in1, helpers.consume(bs, "pt-same"), "pt-same")
      same_records(want_even, helpers.consume(bs, "pt-even"), "pt-even")
      same_records(in2, helpers.consume(bs, "pt-fan"), "pt-fan")
      same_records(want_up, helpers.consume(bs, "pt-up"), "pt-up")
      assert.equal(0, node:stop())
      assert.not_matches("ERROR", node:log())
    end)
  end)
end)
