-- scripts/examples/wordcount.lua through the test driver (beck.testing): the
-- file runs unchanged, on the real runtime and RocksDB stores, without a broker.
local testing = require "beck.testing"

local TOPOLOGY = "scripts/examples/wordcount.lua"

local kvs = require("spec.helpers").kvs
local close_driver = require("spec.helpers").close_driver

local rows = require("spec.helpers").rows

describe("examples/wordcount.lua (test driver)", function()
  local driver
  after_each(function() driver = close_driver(driver) end)

  it("writes the new count of each word, in the order of the words", function()
    driver = testing.driver(TOPOLOGY)
    local lines, counts = driver:input("text-lines"), driver:output("word-counts")
    lines:pipe("l1", "the quick brown fox", 1000)
    assert.same({ { "the", "1" }, { "quick", "1" }, { "brown", "1" }, { "fox", "1" } },
                kvs(counts:read_all()))
    lines:pipe("l2", "jumps over the lazy dog, the end", 1700000000123, { source = "spec" })
    local got = counts:read_all()
    assert.same({ { "jumps", "1" }, { "over", "1" }, { "the", "2" }, { "lazy", "1" },
                  { "dog", "1" }, { "the", "3" }, { "end", "1" } }, kvs(got))
    assert.is_true(counts:is_empty())
    -- each count carries its line's timestamp and headers
    for _, r in ipairs(got) do
      assert.equal(1700000000123, r.timestamp)
      assert.same({ source = "spec" }, r.headers)
    end
  end)

  it("lower-cases, splits on anything but letters, and skips tombstones", function()
    driver = testing.driver(TOPOLOGY)
    driver:input("text-lines"):pipe_list {
      { "a", "Hello, HELLO! hello..." },
      { "b", nil },                         -- a tombstone: no words
      { "c", "" },                          -- an empty line: no words
      { "d", "it's 2024: e-mail  me\tnow" }, -- digits are not words
    }
    assert.same({ hello = "3", it = "1", s = "1", e = "1", mail = "1", me = "1", now = "1" },
                driver:output("word-counts"):read_key_values())
  end)

  it("keeps the counts in the store 'counts', as the outputs said", function()
    driver = testing.driver(TOPOLOGY)
    local lines = driver:input("text-lines")
    local text = {
      "to be or not to be",
      "that is the question",
      "whether tis nobler in the mind to suffer",
    }
    for i, line in ipairs(text) do lines:pipe("line" .. i, line, i * 1000) end
    local latest = driver:output("word-counts"):read_key_values()
    local st = driver:store("counts")
    assert.same({
      { "be", "2" }, { "in", "1" }, { "is", "1" }, { "mind", "1" }, { "nobler", "1" },
      { "not", "1" }, { "or", "1" }, { "question", "1" }, { "suffer", "1" }, { "that", "1" },
      { "the", "2" }, { "tis", "1" }, { "to", "3" }, { "whether", "1" },
    }, rows(st:all()))
    for word, n in pairs(latest) do assert.equal(n, st:get(word)) end
    assert.equal(14, st:count())
    assert.same({ { "to", "3" } }, rows(st:range("tn", "tz")))
    assert.same({ { "that", "1" }, { "the", "2" } }, rows(st:prefix("th")))
    assert.is_nil(st:get("hamlet"))
  end)

  it("counts the same under a record cache of 0 (every write to RocksDB)", function()
    local text = { "a b a", "b c a", "c c c b a" }
    local results = {}
    for _, cache in ipairs { 10485760, 0 } do
      local d = testing.driver(TOPOLOGY, { cache_max_bytes = cache })
      for i, line in ipairs(text) do d:input("text-lines"):pipe("k" .. i, line) end
      results[#results + 1] = { kvs(d:output("word-counts"):read_all()),
                                rows(d:store("counts"):all()) }
      d:close()
    end
    assert.same(results[1], results[2])
    assert.same({ { "a", "4" }, { "b", "3" }, { "c", "4" } }, results[1][2])
  end)

  -- The example's own caveat: a word is counted by the task of its line's
  -- partition. With 4 partitions, lines keyed by their first word keep the
  -- counts of first words exact; a word in lines of two partitions is counted
  -- by each task.
  it("counts per task when the input has several partitions", function()
    driver = testing.driver(TOPOLOGY, { partitions = 4 })
    local lines = driver:input("text-lines")
    for _, line in ipairs { "apple pie", "apple tart", "apple cake", "lemon pie" } do
      lines:pipe(line:match("^%a+"), line)
    end
    local st = driver:store("counts")
    assert.equal("3", st:get("apple"))
    assert.equal("1", st:get("lemon"))
    local pies = {}
    for k, v in st:prefix("pie") do pies[#pies + 1] = { k, v } end
    -- "pie" came in lines keyed apple and lemon, which Kafka's partitioner
    -- puts on different partitions: each task counted its own
    local ffi = require "ffi"
    assert.are_not.equal(ffi.C.bk_ffi_hash_partition("apple", 5, 4),
                         ffi.C.bk_ffi_hash_partition("lemon", 5, 4))
    assert.same({ { "pie", "1" }, { "pie", "1" } }, pies)
  end)

  it("keeps its counts on disk: a second run on the same state_dir goes on counting", function()
    local dir = os.tmpname()
    os.remove(dir)
    finally(function() os.execute("rm -rf '" .. dir .. "'") end)
    local d = testing.driver(TOPOLOGY, { state_dir = dir })
    d:input("text-lines"):pipe("k", "hello world hello")
    d:close()
    driver = testing.driver(TOPOLOGY, { state_dir = dir })
    assert.same({ { "hello", "2" }, { "world", "1" } }, rows(driver:store("counts"):all()))
    driver:input("text-lines"):pipe("k", "hello again")
    assert.same({ hello = "3", again = "1" }, driver:output("word-counts"):read_key_values())
    driver:close()
    driver = nil
  end)
end)
