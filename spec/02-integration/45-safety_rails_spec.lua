-- One mistaken command must not corrupt a running app (docs/cluster.md, Safety rails): a
-- node started without --cluster 1 beside a live cluster, or with a live member's node id,
-- is refused before it makes anything, the incumbents keep running, and the counts stay
-- exact. Settings a node on its own cannot use, a state directory that is a file, an
-- endpoint that does not parse and brokers that do not answer are refused with a message
-- that names them, before any topic is made.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local BECK = helpers.beck_bin()
local make_lines, committed_total = cluster.bucket_lines, cluster.committed_total
local running, node, latest = cluster.running, cluster.start_node, cluster.latest

-- `beck run wordcount` with args, to its end (it must end by itself: refused)
local function refused(args, timeout)
  local argv = { BECK, "run", cluster.WORDCOUNT }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local t0 = helpers.now()
  local st, _, err = helpers.run(argv, { timeout = timeout or 60 })
  return st, err, helpers.now() - t0
end

local function topics(bs)
  local names = {}
  for _, t in ipairs(helpers.list_topics(bs)) do names[t] = true end
  return names
end

describe("safety rails", function()
  after_each(helpers.cleanup)

  it("refuse a node on its own beside a live cluster, and a second process with a live "
     .. "member's node id; the incumbents keep counting exactly", function()
    local broker = helpers.start_broker { topics = { "text-lines:4" } }
    local bs = broker.bootstrap
    local exact = {}
    local a, b = node(bs, "na", "a"), node(bs, "nb", "b")
    helpers.eventually(function() return running(a) + running(b) == 4 end, 60, 0.2)
    helpers.produce(bs, "text-lines", make_lines(1, 4000, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == 4000 end, 60, 0.3)

    -- the rogue: no --cluster, an empty state directory of its own
    local st, err = refused { "-b", bs, "--node-id", "rogue", "--state-dir", helpers.tmpdir() }
    assert.is_not.equal(0, st, err)
    assert.is_truthy(err:match("app wordcount has live cluster members %(")
                     and err:match("na %(last heartbeat") and err:match("nb %(last heartbeat")
                     and err:match("%-%-cluster 1"), err)
    assert.is_nil(err:match("stream%-%d+: running"), err)

    -- the same id as a live member: refused, and the incumbent is left alone
    st, err = refused(cluster.argv_of(bs, "na", "c"))
    assert.is_not.equal(0, st, err)
    assert.is_truthy(err:match("node id na is held by a live member of app wordcount")
                     and err:match("%-%-replace%-node"), err)
    assert.is_true(a:alive())
    -- (log text: the message is the feature, what an operator or a user reads)
    assert.is_nil(a:log():match("another member uses this node id"), a:log())

    helpers.produce(bs, "text-lines", make_lines(4001, 8000, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == 8000 end, 60, 0.3)
    local kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, n in pairs(exact) do assert.equal(n, kv[w], "count of " .. w) end
    assert.is_true(a:alive() and b:alive())

    -- --replace-node takes the id over: the incumbent is ended, the newcomer runs its share
    local c = helpers.start_node(cluster.WORDCOUNT, cluster.argv_of(bs, "na", "c", "--replace-node"),
                                 { name = "na2" })
    helpers.eventually(function() return not a:alive() end, 30, 0.2)
    -- (log text: the message is the feature, what an operator or a user reads)
    assert.is_truthy(a:log():match("another member uses this node id"), a:log())
    helpers.eventually(function() return running(b) + running(c) == 4 end, 60, 0.2)
    helpers.produce(bs, "text-lines", make_lines(8001, 12000, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == 12000 end, 60, 0.3)
    kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, n in pairs(exact) do assert.equal(n, kv[w], "count of " .. w) end
    assert.equal(0, b:stop())
    assert.equal(0, c:stop())

    -- a node killed a moment ago restarts with its id: its old incarnation heartbeats no more
    local d = node(bs, "nd", "a")
    helpers.eventually(function() return running(d) > 0 end, 60, 0.2)
    d:kill()
    local d2 = helpers.start_node(cluster.WORDCOUNT, cluster.argv_of(bs, "nd", "a"), { name = "nd2" })
    helpers.eventually(function() return running(d2) == 4 end, 60, 0.2)
    -- (log text: the message is the feature, what an operator or a user reads)
    assert.is_truthy(d2:log():match("node id nd: its incarnation %d+ in the log has sent no "
                                    .. "heartbeat"), d2:log())
  end)

  it("refuse, before any topic is made, what can be checked first", function()
    local broker = helpers.start_broker {}
    local bs = broker.bootstrap
    local file = helpers.tmpdir() .. "/a-file"
    io.open(file, "w"):close()
    local cases = {
      { { "-b", bs, "--num-standby-replicas", "1" },
        "num_standby_replicas=1 means something to a cluster node only" },
      { { "-b", bs, "--rack", "a" }, "rack=a means something to a cluster node only" },
      { { "-b", bs, "--replace-node" }, "replace_node=1 means something to a cluster node only" },
      { { "-b", bs, "--state-dir", file }, "state_dir " .. cluster.plain(file) .. ": not a directory" },
      { { "-b", bs, "--endpoint", "nohostport" }, "endpoint 'nohostport': expected host:port" },
      { { "-b", "127.0.0.1:1" }, "no broker answered at 127%.0%.0%.1:1 %(%-b%) within 10 s" },
    }
    for _, c in ipairs(cases) do
      local st, err, took = refused(c[1], 40)
      assert.is_not.equal(0, st, err)
      assert.is_truthy(err:match(c[2]), "wanted '" .. c[2] .. "' in:\n" .. err)
      assert.is_true(took < 20, string.format("%.1f s", took))
    end
    local made = topics(bs)
    assert.is_nil(made["wordcount-control"])
    for t in pairs(made) do
      assert.is_nil(t:match("^wordcount%-"), "made " .. t)
    end
  end)
end)
