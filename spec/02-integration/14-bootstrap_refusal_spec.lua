-- Cold bootstrap refused (runtime/replica/bootstrap.c, runtime/replica/sftp.c): every way a replica's fetch
-- of the active's snapshot can be refused ends the bootstrap with one clear line in the
-- replica node's log, "bootstrap 0_0: failed: <reason>; the standby restores from the
-- changelog instead", and the replica is then built from the changelog: its store equals the
-- active's key by key and every count is exact. No node log shows a private key.
--
-- Real processes only: a dev broker, one active node "na" of wordcount (one task, 0_0, a
-- 20,000-word store), an OpenSSH sshd on 127.0.0.1 serving na's snapshots, and for each case
-- a fresh node that joins with --bootstrap-min-records 1000 (so it asks na for a snapshot),
-- gets the refusal, restores from the changelog, and is stopped and dumped (`beck dump`).
-- Cases: a wrong host key in known_hosts, an empty known_hosts (no trust on first use), a
-- user key not in authorized_keys, a snapshot whose manifest names "../escape", a snapshot
-- file with a flipped byte, and sshd down. A first case with good settings proves the same
-- set-up does build the replica from the snapshot, so each refusal is the fault's doing.
--
-- The manifest and the corrupted file are end to end too: the sshd's sftp subsystem is a
-- small wrapper (written below) that, before it execs OpenSSH's own sftp-server, alters the
-- snapshots in na's snapshot directory as a mode file says ("none", "escape": the manifest's
-- first file renamed "../escape"; "corrupt": a copy of the largest file with one byte
-- flipped replaces it, so the hard link into na's live RocksDB is left alone). That is the
-- active's disk or host going bad between the snapshot and the fetch; the replica sees it
-- only through SFTP. Spec 11 (beck fetch) and 12 (install) cover the same refusals, and more
-- forms of them (absolute names, a/b, a file cut short, symlinks...), at the transport level.
local helpers = require "spec.helpers"
local sshd_fixture = require "spec.fixtures.sshd"
local cluster = require "spec.fixtures.cluster"

local APP = cluster.APP
local WORDS = 20000
local LINES = 4000 -- each word twice
local TASK = "0_0"
local CHANGELOG = "wordcount-counts-changelog"

-- Lines of 10 words of a WORDS-word store (word w is "k" followed by its number spelled in
-- letters), keyed so that a word is counted by one task.
local function make_lines(first, last, exact)
  return cluster.spelled_lines(first, last, exact, WORDS)
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function ls(dir)
  local p = io.popen("ls -A " .. q(dir) .. " 2>/dev/null")
  local names = {}
  for name in p:lines() do names[#names + 1] = name end
  p:close()
  return names
end

local plain = cluster.plain

-- The store of task 0_0 in a stopped node's state directory, as key -> value, and its size.
local function dump(state) return cluster.dump(state, TASK) end

-- The sftp subsystem of the spec's sshd (see the header). %ROOT%: na's snapshot directory,
-- %MODE%: the mode file, %MARKS%: where it notes the snapshots it has altered (once each).
local WRAPPER = [[#!/bin/sh
root=%ROOT%; marks=%MARKS%; mode=$(cat %MODE%)
for m in "$root"/*/beck-manifest; do
  [ -f "$m" ] || continue
  d=$(dirname "$m"); mark="$marks/$(basename "$d")"
  [ -e "$mark" ] && continue
  case "$mode" in
  escape)
    sed -i '0,/^file /s#^\(file [0-9]* [0-9a-f]*\) .*#\1 ../escape#' "$m" ;;
  corrupt)
    /usr/bin/python3 - "$d" <<'EOF'
import os, sys
d = sys.argv[1]
files = [l.split() for l in open(os.path.join(d, "beck-manifest")) if l.startswith("file ")]
name = max(files, key=lambda f: int(f[1]))[3]
b = bytearray(open(os.path.join(d, name), "rb").read())
b[len(b) // 2] ^= 0xff
open(os.path.join(d, name + ".t"), "wb").write(b)
os.rename(os.path.join(d, name + ".t"), os.path.join(d, name))
EOF
    ;;
  *) continue ;;
  esac
  : > "$mark"
done
exec /usr/lib/openssh/sftp-server
]]

-- The fixture's sshd (keys, known_hosts, port), restarted on its port with the wrapper as
-- its sftp subsystem.
local function tampering_sshd(snapshots, work)
  local s = sshd_fixture.start()
  s:stop()
  s.mode = work .. "/tamper-mode"
  helpers.write_file(s.mode, "none\n")
  os.execute("mkdir -p " .. q(work .. "/marks"))
  local wrapper = work .. "/sftp-tamper.sh"
  helpers.write_file(wrapper, (WRAPPER:gsub("%%(%u+)%%", { ROOT = q(snapshots),
                                                          MARKS = q(work .. "/marks"),
                                                          MODE = q(s.mode) })))
  assert(os.execute("chmod 755 " .. q(wrapper)))
  local config = s.dir .. "/sshd_config"
  -- sshd starts a subsystem through the user's shell; bash reads ~/.bashrc when sshd runs
  -- it at shell level 1 (pyenv, conda... took seconds there): SHLVL=1 makes it level 2
  local text, n = helpers.read_file(config):gsub("Subsystem sftp internal%-sftp",
                                                 "Subsystem sftp " .. wrapper ..
                                                 "\nSetEnv SHLVL=1")
  assert.equal(1, n)
  helpers.write_file(config, text)
  s.config = config
  function s.restart(self)
    self.proc = helpers.spawn({ "/usr/sbin/sshd", "-D", "-e", "-f", self.config },
                              { name = "sshd" })
    helpers.eventually(function()
      if sshd_fixture.port_open(self.port) then return true end
      assert(self.proc:alive(), "sshd exited:\n" .. self.proc:log())
    end, 10, 0.02)
  end
  s:restart()
  return s
end

local function node(bs, id, rack, state, extra)
  return cluster.start_node(bs, id, rack, cluster.STANDBY,
                            { "--probing-rebalance-interval-ms", "1000", "--state-dir", state },
                            extra)
end

describe("cold bootstrap refused", function()
  local sshd, broker, bs, na, na_state, work
  local exact, hw = {}, 0
  local dumps = {}      -- replica node id -> its dumped store
  local secrets = {}    -- private key texts no log may show

  setup(function()
    work = helpers.tmpdir()
    na_state = helpers.tmpdir()
    sshd = tampering_sshd(na_state .. "/" .. APP .. "/snapshots", work)
    broker = helpers.start_broker { topics = { "text-lines:1" } }
    bs = broker.bootstrap
    -- the active serves snapshots (it needs only its sshd); it fetches none itself
    na = node(bs, "na", "a", na_state, { "--ssh-host", "127.0.0.1",
                                         "--ssh-port", tostring(sshd.port) })
    helpers.eventually(function() return cluster.running(na) == 1 end,
                       40, 0.1)
    helpers.produce(bs, "text-lines", make_lines(0, LINES - 1, exact), { timeout = 60 })
    helpers.eventually(function()
      return helpers.committed(bs, "text-lines", APP)[0] == LINES
    end, 60, 0.3)
    hw = helpers.count(bs, CHANGELOG)
    assert.is_true(hw > 1000, "changelog records: " .. hw)
    secrets[#secrets + 1] = assert(helpers.read_file(sshd.key))
  end)

  teardown(helpers.cleanup)

  -- No log shows a private key, or any line of one.
  local function assert_no_secret(name, log)
    assert.is_nil(log:find("PRIVATE KEY", 1, true), name .. "'s log shows a private key")
    for _, key in ipairs(secrets) do
      for line in key:gmatch("[^\n]+") do
        if not line:match("^%-%-%-%-%-") and #line >= 16 then
          assert.is_nil(log:find(line, 1, true), name .. "'s log shows a line of a private key")
        end
      end
    end
  end

  -- A fresh node joins with ssh settings `ssh` (key, known_hosts); its replica of 0_0 must
  -- end the way `expect` says (a reason pattern, or true: installed), catch up, and after a
  -- stop hold exactly what the active holds.
  local function replica(id, ssh, expect)
    local state = helpers.tmpdir()
    local n = node(bs, id, "b", state, {
      "--ssh-key", ssh.key, "--ssh-known-hosts", ssh.known_hosts, "--ssh-user", sshd.user,
      "--bootstrap-min-records", "1000", "--bootstrap-timeout-ms", "20000" })
    finally(function() if n:alive() then n:kill() end end)

    local asked = "bootstrap " .. TASK .. ": asking na for a snapshot %((%d+) changelog " ..
                  "record%(s%) to replay %(bootstrap_min_records 1000%)%)"
    local log
    if expect == true then
      log = helpers.eventually(function()
        local l = n:log()
        return l:match("bootstrap 0_0: installed snapshot") and l
      end, 40, 0.1)
      assert.is_nil(log:match("bootstrap [^\n]*failed"), log)
    else
      local reason
      log = helpers.eventually(function()
        local l = n:log()
        reason = l:match("bootstrap 0_0: failed: ([^\n]-); the standby restores from the "
                         .. "changelog instead\n")
        return reason and l
      end, 40, 0.1)
      assert.matches(expect, reason)
      print(string.format("\n  %s: %s", id, reason))
    end
    -- the replica had enough to replay to ask, and asked once: a failed bootstrap is not retried
    local first = log:find(asked)
    assert.is_truthy(first, "asked na for a snapshot:\n" .. log)
    local replay = tonumber(log:match(asked))
    assert.is_true(replay > 1000 and replay <= helpers.count(bs, CHANGELOG), "replay " .. replay)
    assert.is_nil(log:find(asked, first + 1), "asked only once")

    -- then it tails the changelog: from offset 0 after a refusal (the restore), from the
    -- snapshot's offset after an install; and it catches up with the active
    local ended = expect == true and log:find("bootstrap 0_0: installed snapshot", 1, true)
                  or log:find("bootstrap 0_0: failed: ", 1, true)
    helpers.eventually(function()
      local from = n:log():match("standby 0_0 store counts: tailing " .. plain(CHANGELOG) ..
                                 " %[0%] from offset (%d+)", ended)
      if expect == true then return from and tonumber(from) > 0 end
      return from == "0"
    end, 20, 0.1)
    cluster.wait_progress(bs, id, function() return helpers.count(bs, CHANGELOG) end)
    assert.equal(0, n:stop())
    log = n:log()
    assert_no_secret(id, log)
    assert_no_secret("na", na:log())
    if expect ~= true then
      assert.is_nil(log:find("installed snapshot", 1, true))
    end
    -- nothing of the fetch is left beside the task's directory
    for _, name in ipairs(ls(state .. "/" .. APP)) do
      assert.is_nil(name:match("^%.bootstrap%-"), "left over: " .. name)
    end
    -- the active removed the snapshot it made (told by "snapshot-fetched")
    helpers.eventually(function() return #ls(na_state .. "/" .. APP .. "/snapshots") == 0 end,
                       15, 0.1)

    local kv, count = dump(state)
    assert.equal(WORDS, count)
    for w, c in pairs(exact) do assert.equal(tostring(c), kv[w], id .. ": count of " .. w) end
    dumps[id] = kv
    return state, log
  end

  local function good() return { key = sshd.key, known_hosts = sshd.known_hosts } end

  it("control: with good settings the replica is built from the snapshot", function()
    replica("n-control", good(), true)
  end)

  it("refuses a host key that differs from known_hosts", function()
    local other = sshd_fixture.keygen(work .. "/other_host_key")
    local kh = work .. "/known_hosts-other"
    helpers.write_file(kh, sshd_fixture.known_hosts_line(sshd.port, other .. ".pub"))
    replica("n-hostkey", { key = sshd.key, known_hosts = kh },
            "^host key of 127%.0%.0%.1:" .. sshd.port .. " does not match known_hosts " ..
            plain(kh) .. " %(changed key%?%): refused$")
  end)

  it("refuses a host that is not in known_hosts (no trust on first use)", function()
    local kh = work .. "/known_hosts-empty"
    helpers.write_file(kh, "")
    replica("n-unknown", { key = sshd.key, known_hosts = kh },
            "^host 127%.0%.0%.1:" .. sshd.port .. " is not in known_hosts " .. plain(kh) ..
            ": refused$")
  end)

  it("is refused with a user key that is not in authorized_keys", function()
    local stranger = sshd_fixture.keygen(work .. "/stranger_key")
    secrets[#secrets + 1] = assert(helpers.read_file(stranger))
    replica("n-userkey", { key = stranger, known_hosts = sshd.known_hosts },
            "^127%.0%.0%.1:" .. sshd.port .. " refused public%-key authentication of user " ..
            plain(sshd.user) .. " with key " .. plain(stranger) ..
            " %(not in authorized_keys%?%)$")
  end)

  it("refuses a manifest that names a file outside the snapshot directory", function()
    helpers.write_file(sshd.mode, "escape\n")
    finally(function() helpers.write_file(sshd.mode, "none\n") end)
    local state = replica("n-escape", good(),
                          "^manifest line %d+: file name '%.%./escape' leaves the snapshot " ..
                          "directory: refused$")
    assert.is_nil(helpers.read_file(state .. "/" .. APP .. "/escape"))
    assert.is_nil(helpers.read_file(state .. "/escape"))
  end)

  it("refuses a snapshot file that changed after its manifest was written", function()
    helpers.write_file(sshd.mode, "corrupt\n")
    finally(function() helpers.write_file(sshd.mode, "none\n") end)
    replica("n-corrupt", good(),
            "^[%w._-]+: checksum %x+, expected %x+: refused %(fetched from 127%.0%.0%.1:" ..
            sshd.port .. ":" .. plain(na_state) .. "/" .. APP .. "/snapshots/[^/]+/[%w._-]+%)$")
  end)

  it("gives up on an sshd that is down", function()
    sshd:stop()
    assert.is_false(sshd_fixture.port_open(sshd.port))
    replica("n-down", good(),
            "^cannot connect to 127%.0%.0%.1:" .. sshd.port .. ": Connection refused$")
  end)

  it("leaves the active's store whole and exact, and every replica equal to it", function()
    local kv = {}
    for _, r in ipairs(helpers.consume(bs, "word-counts", { timeout = 60 })) do
      kv[r.key] = r.value
    end
    for w, c in pairs(exact) do assert.equal(tostring(c), kv[w], "output count of " .. w) end
    assert.equal(0, na:stop())
    assert_no_secret("na", na:log())
    local active, count = dump(na_state)
    assert.equal(WORDS, count)
    local replicas = 0
    for id, mine in pairs(dumps) do
      for k, v in pairs(active) do assert.equal(v, mine[k], id .. " key " .. k) end
      replicas = replicas + 1
    end
    assert.equal(7, replicas)
  end)
end)
