-- Queries over HTTP (runtime/query, docs/queries.md): every node serves the app's state as a
-- key-value database. Three nodes in racks a/b/c, one standby per task, count keyed input
-- (spec/fixtures/stamped_count.lua); an outside client (spec/fixtures/query_client.py,
-- Python's http.client) reads every key through a node that does not own it, scans the whole
-- store a page at a time, and reads on while a node is killed with SIGKILL: with
-- replica=any&max_lag the standbys answer, without it the failed node's keys get 503s until
-- they are promoted, and no answer is ever a wrong value. A token guards every endpoint
-- but /healthz. The status page, loaded in headless Chromium, shows the tasks `beck status`
-- shows, and leaves a screenshot in build/. BECK_SPEC_QUERY_KEYS sets the number of keys (10,000; the issue's figure is
-- 200,000).
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local cjson = require "cjson.safe"

local KEYS = tonumber(os.getenv("BECK_SPEC_QUERY_KEYS") or "") or 10000
local PARTITIONS = 6
local TOKEN = "s3cret-token"
local PY = "/usr/bin/python3"
local CLIENT = "spec/fixtures/query_client.py"

local function start(bs, id, rack)
  return helpers.start_node("spec/fixtures/stamped_count.lua", {
    "-b", bs, "--cluster", "1", "--node-id", id, "--rack", rack, "--threads", "2",
    "--commit-interval-ms", "300", "--num-standby-replicas", "1",
    "--heartbeat-interval-ms", "200", "--session-timeout-ms", "2000",
    "-X", "fetch.wait.max.ms=10", "--endpoint", "127.0.0.1:0", "--http-token", TOKEN },
    { name = id })
end

local function url_of(node)
  return node:query_url(20)
end

-- query_client.py args..., stdin: the expected state; its JSON answer.
local function client(args, stdin, timeout)
  local argv = { PY, CLIENT }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local st, out, err = helpers.run(argv, { name = "query_client-" .. args[1], stdin = stdin,
                                           timeout = timeout or 180 })
  assert.equal(0, st, "query_client " .. args[1] .. ": " .. err)
  return assert(cjson.decode(out), out)
end

local function spawn_client(args, stdin)
  local argv = { PY, CLIENT }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return helpers.spawn(argv, { name = "query_client-" .. args[1], stdin = stdin })
end

describe("queries over HTTP", function()
  after_each(helpers.cleanup)

  it("answer every key from any node, scan in order, fail over to standbys, never wrong",
     function()
    local broker = helpers.start_broker { topics = { "stamp-in:" .. PARTITIONS,
                                                     "stamp-out:" .. PARTITIONS } }
    local bs = broker.bootstrap
    local nodes = { na = start(bs, "na", "a"), nb = start(bs, "nb", "b"),
                    nc = start(bs, "nc", "c") }
    local urls = {}
    for id, n in pairs(nodes) do urls[id] = url_of(n) end
    helpers.eventually(function() return cluster.settled(nodes, 2) end, 60, 0.2)

    -- key k<i> counted 1 + i % 3 times, the keys' records interleaved
    local records, want, total = {}, {}, 0
    for round = 1, 3 do
      for i = 1, KEYS do
        if round <= 1 + i % 3 then
          local k = "k" .. i
          records[#records + 1] = { k, tostring(round) }
          want[k] = tostring(round)
          total = total + 1
        end
      end
    end
    local t0 = helpers.now()
    helpers.produce(bs, "stamp-in", records, { timeout = 120 })
    helpers.eventually(function()
      return cluster.committed_total(bs, "stamp-in", "stamped") == total
    end, 120, 0.3)
    local lines = {}
    for k, v in pairs(want) do lines[#lines + 1] = cjson.encode { key = k, value = v } end
    local expected = helpers.workdir() .. "/expected.jsonl"
    local f = assert(io.open(expected, "w"))
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
    print(string.format("\n  %d keys, %d records counted in %.1f s", KEYS, total,
                        helpers.now() - t0))

    -- the token: asked everywhere but /healthz
    local r = client({ "status", urls.na, "/v1/stores" })
    assert.equal(401, r.status, r.body)
    assert.equal(200, client({ "status", urls.na, "/healthz" }).status)
    r = client({ "status", urls.na, "/v1/stores", TOKEN })
    assert.equal(200, r.status, r.body)
    local stores = cjson.decode(r.body).stores
    assert.equal("counts", stores[1].store)
    assert.equal(PARTITIONS, stores[1].tasks)
    r = client({ "status", urls.nb, "/v1/stores/nope/keys/k1", TOKEN })
    assert.equal(404, r.status, r.body)
    assert.matches("no store named 'nope'", r.body)
    r = client({ "status", urls.nb, "/v1/stores/counts/keys/never-sent", TOKEN })
    assert.equal(404, r.status, r.body)
    assert.matches("no such key", r.body)
    r = client({ "status", urls.nc, "/readyz", TOKEN })
    assert.equal(200, r.status, r.body)

    -- every key through a node that does not own it
    t0 = helpers.now()
    local c = client({ "check", TOKEN, "counts", tostring(PARTITIONS), urls.na, urls.nb,
                       urls.nc }, expected)
    local took = helpers.now() - t0
    assert.same({}, c.wrong)
    assert.equal(3, c.nodes)
    assert.equal(KEYS, c.checked)
    assert.equal(KEYS, c.routed)
    print(string.format("  %d keys read through a node that does not own them in %.1f s "
                        .. "(%.0f a second, one client)", KEYS, took, KEYS / took))

    -- the whole store, a page at a time, in key order
    t0 = helpers.now()
    local s = client({ "scan", TOKEN, "counts", "1000", urls.nb }, expected)
    assert.is_nil(s.error)
    assert.same({}, s.wrong)
    assert.is_true(s.ordered)
    assert.equal(KEYS, s.keys)
    assert.equal(0, s.missing)
    assert.equal(0, s.extra)
    print(string.format("  scanned %d keys in %d pages of 1000 in %.1f s", s.keys, s.pages,
                        helpers.now() - t0))

    -- beck get and beck scan find a node through the control topic
    local st, out, err = helpers.run({ helpers.beck_bin(), "get", "-b", bs, "--app", "stamped",
                                       "--token", TOKEN, "counts", "k5" }, { name = "get" })
    assert.equal(0, st, err)
    assert.equal(want.k5, cjson.decode(out).value)
    st = helpers.run({ helpers.beck_bin(), "get", "-b", bs, "--app", "stamped", "--token", TOKEN,
                       "counts", "never-sent" }, { name = "get" })
    assert.equal(1, st)
    st, out, err = helpers.run({ helpers.beck_bin(), "scan", "-b", bs, "--app", "stamped",
                                 "--token", TOKEN, "counts", "--from", "k100", "--to", "k1009",
                                 "--limit", "4", "--pages", "0" }, { name = "scan" })
    assert.equal(0, st, err)
    local got = {}
    for line in out:gmatch("[^\n]+") do
      for _, item in ipairs(cjson.decode(line).items) do got[#got + 1] = item.key end
    end
    -- the keys from k100 to k1009 in byte order (k100, k1000, k10000, ... k1009)
    local between = {}
    for k in pairs(want) do
      if k >= "k100" and k <= "k1009" then between[#between + 1] = k end
    end
    table.sort(between)
    assert.is_true(#between >= 11)
    assert.same(between, got)

    -- the status page in headless Chromium: its tasks are what `beck status` shows
    local status = cluster.status_json(bs, "stamped")
    local shot = helpers.beck_bin():gsub("bin/beck$", "") .. "build/status-page.png"
    local dom = helpers.eventually(function()
      local st2, out2 = helpers.run({ "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                                      "--virtual-time-budget=5000", "--dump-dom",
                                      urls.nb .. "/#token=" .. TOKEN }, { name = "chromium",
                                                                         timeout = 60 })
      if st2 == 0 and out2:match('data%-ready="1"') then return out2 end
    end, 60, 0.5)
    local rows = {}
    for task, active, sbs in dom:gmatch('<tr data%-task="([%d_]+)" data%-active="([^"]*)" '
                                        .. 'data%-standbys="([^"]*)">') do
      rows[#rows + 1] = { task = task, active = active, standbys = sbs }
    end
    assert.equal(PARTITIONS, #rows)
    for i, t in ipairs(status.tasks) do
      assert.equal("0_" .. (i - 1), rows[i].task)
      assert.equal(t.active, rows[i].active, "active of " .. rows[i].task)
      assert.equal(table.concat(t.standby or {}, ","), rows[i].standbys,
                   "standbys of " .. rows[i].task)
    end
    assert.matches('data%-epoch="' .. status.epoch .. '"', dom)
    -- and what nb serves shows its life there (/v1/status's tasks): each active live, each
    -- standby replica tailing its changelogs
    for role, want in pairs { active = "live", standby = "tailing" } do
      local n = 0
      for state in dom:gmatch('<tr data%-task="[%d_]+" data%-role="' .. role ..
                              '" data%-state="([^"]*)">') do
        assert.equal(want, state, role)
        n = n + 1
      end
      assert.is_true(n > 0, "no " .. role .. " replica of nb's shows its state on the page")
    end
    st = helpers.run({ "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                       "--virtual-time-budget=5000", "--window-size=1100,900",
                       "--screenshot=" .. shot, urls.nb .. "/#token=" .. TOKEN },
                     { name = "chromium", timeout = 60 })
    assert.equal(0, st)
    print("  status page: " .. #rows .. " tasks as beck status shows them; screenshot " .. shot)

    -- the standbys have caught up: then kill nc and read on through the others
    helpers.eventually(function()
      for _, t in ipairs(cluster.status_json(bs, "stamped").tasks) do
        for _, sb in ipairs(t.standby or {}) do
          local ok
          for _, p in ipairs(t.progress or {}) do
            if p.node == sb and p.lag == 0 then ok = true end
          end
          if not ok then return nil, "standby of task " .. t.task .. " behind" end
        end
      end
      return true
    end, 60, 0.3)
    local any = spawn_client({ "watch", TOKEN, "counts", "8", "replica=any&max_lag=0",
                               urls.na, urls.nb }, expected)
    local active = spawn_client({ "watch", TOKEN, "counts", "8", "", urls.na, urls.nb },
                                expected)
    helpers.sleep(1.5)
    nodes.nc:kill()
    nodes.nc = nil
    assert.equal(0, any:wait(60))
    assert.equal(0, active:wait(60))
    local wa, wo = cjson.decode(any:stdout()), cjson.decode(active:stdout())
    print(string.format("  during the failover: replica=any %s roles %s; active only %s",
                        cjson.encode(wa.statuses), cjson.encode(wa.roles),
                        cjson.encode(wo.statuses)))
    assert.same({}, wa.wrong)
    assert.same({}, wo.wrong)
    assert.is_true((wa.roles.standby or 0) > 0, "no standby answered")
    -- a standby answers while nothing else can; the gaps left are the moments no replica is
    -- served (a standby runner restarting, a promotion's restore)
    -- As shares of each client's reads (the replica=any client, answered more, asks more):
    -- a tenth of active-only's in a quiet run; under make test's load, when every spec runs
    -- beside three others, the promotion's restore takes longer: 2.5% against 11% under
    -- SAN=1, 3.7% against 9.4% on Kafka. Half of it still tells a standby that answers
    -- from one that does not.
    local function share_503(st)
      local n = 0
      for _, c in pairs(st) do n = n + c end
      return (st["503"] or 0) / math.max(n, 1), st["503"] or 0
    end
    local any_share, any_503 = share_503(wa.statuses)
    assert.is_true(any_503 <= 5 or any_share <= share_503(wo.statuses) / 2,
                   "replica=any: " .. cjson.encode(wa.statuses) .. ", active only: " ..
                   cjson.encode(wo.statuses))
    for code in pairs(wo.statuses) do
      assert.is_truthy(code == "200" or code == "503", "status " .. code)
    end
    assert.is_true((wo.statuses["503"] or 0) > 0, "the failed node's keys were answered")

    -- promoted: every key again, from the two left
    helpers.eventually(function()
      return #cluster.now_of(nodes.na).running + #cluster.now_of(nodes.nb).running == PARTITIONS
    end, 60, 0.2)
    helpers.eventually(function()
      return client({ "status", urls.na, "/readyz", TOKEN }).status == 200 and
             client({ "status", urls.nb, "/readyz", TOKEN }).status == 200
    end, 60, 0.3)
    c = client({ "check", TOKEN, "counts", tostring(PARTITIONS), urls.na, urls.nb }, expected)
    assert.same({}, c.wrong)
    assert.equal(KEYS, c.routed)
    for _, n in pairs(nodes) do assert.equal(0, n:stop()) end
  end)
end)
