-- Bounded changelogs and the snapshot archive (docs/state.md, Bounded changelogs), on a real
-- Apache Kafka (the dev broker neither deletes by retention nor has topic configs).
-- Two `beck run --cluster 1` nodes of wordcount (one standby per task), with
-- --changelog-retention-ms 4000 and an archive every 2 s, one archive seen two ways: node na
-- writes and reads it as sftp://user@127.0.0.1:port/DIR through a real OpenSSH sshd on
-- loopback (spec/fixtures/sshd.lua), node nb as the directory DIR. The changelog is made
-- compact,delete with that retention; once the broker has deleted its head, every node is
-- killed with SIGKILL and its state directory wiped: the restarted nodes, the active and the
-- standby, come back from the archive's snapshot plus the changelog's tail, and every count
-- is exact afterwards. With the
-- archive gone too, the task stops with an error naming the lost offsets. A retention shorter
-- than twice the archive interval, or one without an archive, is refused at start.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"
local sshd_fixture = require "spec.fixtures.sshd"

local CHANGELOG = "wordcount-counts-changelog"

-- node na reaches the archive over SFTP (its key, user and known_hosts are the sshd's), nb
-- as a directory
local function start(bs, id, rack, state, archive, sshd)
  local args = { "--state-dir", state, "--changelog-retention-ms", "4000",
                 "--snapshot-archive-interval-ms", "2000", "--cache-max-bytes", "0",
                 "--snapshot-archive", archive }
  if id == "na" then
    args[#args] = string.format("sftp://%s@127.0.0.1:%d%s", sshd.user, sshd.port, archive)
    for _, a in ipairs { "--ssh-key", sshd.key, "--ssh-known-hosts", sshd.known_hosts,
                         "--ssh-port", tostring(sshd.port) } do
      args[#args + 1] = a
    end
  end
  return cluster.start_node(bs, id, rack, cluster.STANDBY, args)
end

-- the newest manifest of task 0_0 in the archive, or nil
local function archived(archive)
  local p = io.popen("ls '" .. archive .. "/wordcount/0_0' 2>/dev/null | grep manifest | sort | tail -1")
  local name = p:read("*l")
  p:close()
  return name
end

describe("bounded changelogs", function()
  after_each(helpers.cleanup)

  it("come back from the archive after a total loss, or stop naming the lost offsets",
     function()
    if not helpers.real_kafka() then
      pending("needs BECK_SPEC_BACKEND=kafka: the dev broker deletes nothing by retention")
      return
    end
    local broker = helpers.start_broker { topics = { "text-lines:1" } }
    local bs = broker.bootstrap
    local sshd = sshd_fixture.start()
    local archive, exact = helpers.tmpdir(), {}
    local sa, sb = helpers.tmpdir(), helpers.tmpdir()
    local nodes = { na = start(bs, "na", "a", sa, archive, sshd),
                    nb = start(bs, "nb", "b", sb, archive, sshd) }
    -- one task: its active on one node, its standby on the other
    local function placed()
      local run, sb = 0, 0
      for _, node in pairs(nodes) do
        local e = cluster.now_of(node)
        run, sb = run + #e.running, sb + #e.standby
      end
      return run == 1 and sb == 1
    end
    helpers.eventually(placed, 40, 0.2)
    local cfg = helpers.configs(bs, CHANGELOG)
    assert.equal("compact,delete", cfg["cleanup.policy"])
    assert.equal("4000", cfg["retention.ms"])

    helpers.produce(bs, "text-lines", cluster.bucket_lines(1, 2000, exact))
    helpers.eventually(function() return cluster.committed_total(bs) == 2000 end, 60, 0.3)
    -- an archived snapshot of what was counted, then the changelog's head deleted under it
    -- (new records roll its segment; the broker deletes segments past the retention)
    local first = helpers.eventually(function() return archived(archive) end, 30, 0.3)
    local n = 2000
    helpers.eventually(function()
      helpers.produce(bs, "text-lines", cluster.bucket_lines(n + 1, n + 100, exact))
      n = n + 100
      local o = helpers.offsets(bs, CHANGELOG)[0]
      return o[1] > 0, "changelog from " .. o[1]
    end, 60, 2)
    helpers.eventually(function() return cluster.committed_total(bs) == n end, 60, 0.3)
    helpers.eventually(function() return archived(archive) ~= first end, 30, 0.3)

    -- total loss: every node killed, every state directory wiped
    for _, node in pairs(nodes) do node:kill() end
    helpers.run { "rm", "-rf", sa, sb }
    nodes = { na = start(bs, "na", "a", sa, archive, sshd),
              nb = start(bs, "nb", "b", sb, archive, sshd) }
    -- the active from the archive, and the standby too (no cold bootstrap here: no ssh key)
    helpers.eventually(function()
      local active, standby
      for _, node in pairs(nodes) do
        local function archived(e) return e.task == "0_0" and e.from:match("^archived snapshot") end
        active = active or node:last_event("restored", archived)
        standby = standby or node:last_event("standby_restored", archived)
      end
      return active and standby
    end, 60, 0.3)
    helpers.produce(bs, "text-lines", cluster.bucket_lines(n + 1, n + 1000, exact))
    n = n + 1000
    helpers.eventually(function() return cluster.committed_total(bs) == n end, 60, 0.3)
    local kv = cluster.latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, c in pairs(exact) do assert.equal(c, kv[w], "count of " .. w) end

    -- with the archive gone too, nothing can rebuild the state: the task stops, saying so
    for _, node in pairs(nodes) do node:kill() end
    helpers.run { "rm", "-rf", sa, archive }
    local alone = start(bs, "na", "a", sa, archive, sshd)
    assert.is_not.equal(0, alone:wait(60))
    assert.matches("task 0_0: changelog wordcount%-counts%-changelog %[0%] starts at offset %d+ " ..
                   "but the store needs 0: offsets 0 to %d+ are lost, and the archive sftp://.- holds " ..
                   "no snapshot of it: stopping", alone:log())

    -- refused at start
    local st, _, err = helpers.run { helpers.beck_bin(), "run", cluster.WORDCOUNT, "-b", bs,
                                     "--changelog-retention-ms", "3000",
                                     "--snapshot-archive", archive,
                                     "--snapshot-archive-interval-ms", "2000" }
    assert.equal(1, st)
    assert.matches("changelog_retention_ms=3000 is shorter than twice " ..
                   "snapshot_archive_interval_ms=2000", err)
    st, _, err = helpers.run { helpers.beck_bin(), "run", cluster.WORDCOUNT, "-b", bs,
                               "--changelog-retention-ms", "3000" }
    assert.equal(1, st)
    assert.matches("changelog_retention_ms=3000 needs snapshot_archive", err)
  end)

  it("refuses an sftp:// archive it could not use, at start", function()
    for _, case in ipairs {
      { { "sftp://127.0.0.1" }, "expected sftp://%[user@%]host%[:port%]/path" },
      { { "sftp://u@127.0.0.1:0/x", "--ssh-key", "/k" }, "the port is not a number" },
      { { "sftp://127.0.0.1/x" }, "snapshot_archive sftp://127.0.0.1/x needs ssh_key" },
    } do
      local argv = { helpers.beck_bin(), "run", cluster.WORDCOUNT, "-b", "127.0.0.1:1",
                     "--snapshot-archive" }
      for _, a in ipairs(case[1]) do argv[#argv + 1] = a end
      local st, _, err = helpers.run(argv)
      assert.equal(1, st, err)
      assert.matches(case[2], err)
    end
  end)
end)
