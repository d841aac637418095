-- Queries from Lua and of window stores (docs/queries.md): a node alone serves its state
-- over HTTP; its processors ask it through beck.query (spec/fixtures/query_app.lua) and an
-- outside client reads a window store's windows of a key. Keys with '/', '%' and non-ASCII
-- text travel escaped and come back whole.
local helpers = require "spec.helpers"
local cjson = require "cjson.safe"


local http = helpers.http_get

local function latest(records)
  local kv = {}
  for _, r in ipairs(records) do kv[r.key] = r.value end
  return kv
end

describe("beck.query and window stores", function()
  after_each(helpers.cleanup)

  it("answer processors through the node's own server, and windows of a key", function()
    local broker = helpers.start_broker { topics = { "q-in:4", "q-ask:2", "q-counts:4",
                                                     "q-answers:2" } }
    local bs = broker.bootstrap
    local node = helpers.start_node("spec/fixtures/query_app.lua", {
      "-b", bs, "--endpoint", "127.0.0.1:0", "--commit-interval-ms", "200",
      "--threads", "2" }, { name = "qapp" })
    local url = node:query_url(20)
    node:wait_running(30)

    -- key -> timestamps: windows [B + 1000, B + 2000) and [B + 3000, B + 4000), B a recent
    -- whole second (Kafka's retention would drop records stamped 1970 at once)
    local B = (os.time() - 100) * 1000
    local keys = { ["a/b"] = { 1000, 1500, 3000 }, ["a%c"] = { 1999 }, ["ünï"] = { 3001, 3002 },
                   ["b1"] = { 1000 }, ["b2"] = { 1000, 1001 }, ["b3"] = { 1000 } }
    local records, n = {}, 0
    for k, ts in pairs(keys) do
      for _, t in ipairs(ts) do
        records[#records + 1] = { key = k, value = "x", timestamp = B + t }
        n = n + 1
      end
    end
    records[#records + 1] = { key = "raw", value = "\0\255\254ab", timestamp = B + 5000 }
    n = n + 1
    table.sort(records, function(x, y) return x.timestamp < y.timestamp end)
    helpers.produce(bs, "q-in", records)
    helpers.eventually(function()
      local total = 0
      for _, o in pairs(helpers.committed(bs, "q-in", "qapp")) do total = total + o end
      return total == n, string.format("%d of %d committed; the node's log ends:\n%s", total, n,
                                       node:log():sub(-1500))
    end, 60, 0.2)
    helpers.sleep(0.5) -- a commit interval: what was committed is what reads see

    -- the stores, with the serdes the DSL gave them
    local st0, stores = http(url, "/v1/stores")
    assert.equal(200, st0)
    local by = {}
    for _, s in ipairs(stores.stores) do by[s.store] = s end
    assert.same({ "key-value", "string", "number" },
                { by.counts.kind, by.counts.key_serde, by.counts.value_serde })
    assert.same({ "window", "string", "number" },
                { by["per-second"].kind, by["per-second"].key_serde,
                  by["per-second"].value_serde })

    -- an outside client: the count of a key with '/', and a window store's windows
    local st, ans, body = http(url, "/v1/stores/counts/keys/a%2Fb")
    assert.equal(200, st, body)
    assert.equal("a/b", ans.key)
    assert.equal("3", ans.value)
    st, ans, body = http(url, "/v1/stores/per-second/keys/a%2Fb/windows?from=" .. B .. "&to="
                              .. (B + 10000))
    assert.equal(200, st, body)
    assert.same({ { time = B + 1000, value = "2" }, { time = B + 3000, value = "1" } },
                ans.windows)
    assert.is_false(ans.more)
    st, ans = http(url, "/v1/stores/per-second/keys/a%2Fb/windows?from=" .. (B + 2000))
    assert.equal(200, st)
    assert.same({ { time = B + 3000, value = "1" } }, ans.windows)
    st, ans = http(url, "/v1/stores/per-second/keys/%C3%BCn%C3%AF/windows")
    assert.equal(200, st)
    assert.same({ { time = B + 3000, value = "2" } }, ans.windows)
    -- a range of a window store: each window as its record key and time (no raw bytes, no
    -- entry of the store's own time index), in key order
    st, ans, body = http(url, "/v1/stores/per-second/range?limit=1000")
    assert.equal(200, st, body)
    local windows = {}
    for _, it in ipairs(ans.items) do
      assert.is_string(it.key, body)
      assert.is_number(it.time, body)
      windows[#windows + 1] = string.format("%s@%d=%s", it.key, it.time - B, it.value)
    end
    table.sort(windows)
    assert.same({ "a%c@1000=1", "a/b@1000=2", "a/b@3000=1", "b1@1000=1", "b2@1000=2",
                  "b3@1000=1", "raw@5000=1", "ünï@3000=2" }, windows)
    -- and `beck get --window`
    local gst, gout, gerr = helpers.run({ helpers.beck_bin(), "get", "--endpoint",
                                          url:gsub("^http://", ""), "per-second", "a/b",
                                          "--window", "--from", tostring(B),
                                          "--to", tostring(B + 2000) }, { timeout = 30 })
    assert.equal(0, gst, gerr)
    assert.same({ { time = B + 1000, value = "2" } }, assert(cjson.decode(gout)).windows)
    gst, _, gerr = helpers.run({ helpers.beck_bin(), "get", "--endpoint", url:gsub("^http://", ""),
                                 "per-second", "a/b", "--from", "1" }, { timeout = 30 })
    assert.equal(2, gst, gerr)
    assert.matches("give %-%-window", gerr)

    -- a value that is not UTF-8 text comes as base64
    st, ans, body = http(url, "/v1/stores/last/keys/raw")
    assert.equal(200, st, body)
    assert.is_nil(ans.value)
    assert.equal("AP/+YWI=", ans.value_base64) -- 00 ff fe 61 62
    st, ans = http(url, "/v1/stores/per-second/keys/a%2Fb")
    assert.equal(400, st)
    assert.matches("window store", ans.error)
    st, ans = http(url, "/v1/stores/per-second/keys/a%2Fb/windows?from=x")
    assert.equal(400, st)

    -- processors asking through beck.query
    local asks = { { "q1", "get a/b" }, { "q2", "get a%c" }, { "q3", "get ünï" },
                   { "q4", "get never-sent" }, { "q5", "prefix b" }, { "q6", "range a b2" },
                   { "q7", "windows b2" }, { "q8", "windows ünï" } }
    helpers.produce(bs, "q-ask", asks)
    local answers
    helpers.eventually(function()
      answers = latest(helpers.consume(bs, "q-answers"))
      return answers.q8 ~= nil and answers.q1 ~= nil and answers.q4 ~= nil
    end, 60, 0.3)
    assert.same({ q1 = "3", q2 = "1", q3 = "2", q4 = "nil", q5 = "3 b1 b3",
                  q6 = "a%c a/b b1 b2", q7 = (B + 1000) .. "=2", q8 = (B + 3000) .. "=2" },
                answers)

    -- /metrics: the stream threads' counters, per task, from C
    local metrics
    helpers.eventually(function()
      local st2, _, body2 = http(url, "/metrics")
      if st2 ~= 200 then return nil end
      metrics = body2
      local total = 0
      for task, v in metrics:gmatch('beck_task_records_in_total{app="qapp",node="[^"]*",'
                                    .. 'task="([%d_]+)"} (%d+)') do
        if task:match("^0_") then total = total + tonumber(v) end
      end
      return total == n, "records in: " .. total
    end, 20, 0.3)
    assert.matches('beck_task_input_lag_records{app="qapp",node="[^"]*",task="0_%d"} 0\n', metrics)
    assert.matches('beck_thread_commits_total{app="qapp",node="[^"]*",thread="0"} [1-9]', metrics)
    assert.matches('beck_rocksdb_estimated_keys{app="qapp",node="[^"]*",task="0_%d",'
                   .. 'store="counts",role="active"} %d', metrics)
    assert.equal(0, node:stop())
  end)
end)
