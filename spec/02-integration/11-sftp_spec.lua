-- Cold bootstrap's transport (runtime/replica/sftp.c, `beck fetch`): a snapshot directory is
-- fetched over SFTP from a real OpenSSH sshd (spec/fixtures/sshd.lua) on 127.0.0.1, byte
-- for byte, and every unsafe case is refused with a message that says what and where,
-- leaving no file of the snapshot behind: an unknown or changed host key, a user key the
-- server does not accept, manifest names that leave the directory, a file changed after
-- its manifest was written, a symlink, a size that does not match, sshd down or hanging.
-- --rate-limit holds the rate.
local ffi = require "ffi"
local bit = require "bit"
local helpers = require "spec.helpers"
local sshd_fixture = require "spec.fixtures.sshd"

-- XXH3-64 through FFI: bin/beck links libxxhash, so its symbols are in the process.
helpers.cdef("uint64_t XXH3_64bits(const void *data, size_t len);")
local function xxh3(s)
  local v = ffi.C.XXH3_64bits(s, #s)
  return string.format("%08x%08x", tonumber(bit.rshift(v, 32)),
                       tonumber(bit.band(v, 0xffffffffULL)))
end

local function random_bytes(n)
  local f = assert(io.open("/dev/urandom", "rb"))
  local s = f:read(n)
  f:close()
  return s
end

-- Writes files { {name, content}, ... } into dir and a beck-manifest listing `listed`
-- (default: the same), each {name, content} giving the size and checksum.
local function make_snapshot(dir, files, listed)
  os.execute("mkdir -p '" .. dir .. "'")
  local lines = { "beck-snapshot 1", "task 0_3", "id 0_3-1764729600000-1",
                  "created_ms 1764729600000",
                  "store count changelog app-count-changelog 3 next 12345 inputs 1 999" }
  for _, f in ipairs(files) do helpers.write_file(dir .. "/" .. f[1], f[2]) end
  for _, f in ipairs(listed or files) do
    lines[#lines + 1] = string.format("file %d %s %s", #f[2], xxh3(f[2]), f[1])
  end
  lines[#lines + 1] = "end"
  helpers.write_file(dir .. "/beck-manifest", table.concat(lines, "\n") .. "\n")
end

local function ls(dir)
  local p = io.popen("ls -A '" .. dir .. "' 2>/dev/null")
  local out = p:read("*a")
  p:close()
  local names = {}
  for n in out:gmatch("[^\n]+") do names[#names + 1] = n end
  return names
end

describe("beck fetch over SFTP", function()
  local sshd, work

  local function fetch(remote, dest, extra, known_hosts, key)
    local argv = { helpers.beck_bin(), "fetch", "--host", "127.0.0.1", "--port", sshd.port,
                   "--user", sshd.user, "--key", key or sshd.key,
                   "--known-hosts", known_hosts or sshd.known_hosts,
                   "--remote-dir", remote, "--dest", dest }
    for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
    local t0 = helpers.now()
    local st, out, err = helpers.run(argv, { timeout = 30 })
    return st, out, err, helpers.now() - t0
  end

  -- A refused fetch: exit 1, one line on stderr matching `pattern` (plain text), and no
  -- file left in dest.
  local function refused(st, out, err, text)
    assert.equal(1, st)
    assert.equal("", out)
    assert.truthy(err:find(text, 1, true), "expected «" .. text .. "» in:\n" .. err)
    local last = err:match("([^\n]*)\n?$")
    assert.truthy(last:match("^beck fetch: "), err)
  end

  setup(function()
    sshd = sshd_fixture.start()
    work = helpers.tmpdir()
  end)
  teardown(helpers.cleanup)

  it("fetches every file of the manifest, byte for byte", function()
    local files = {
      { "000012.sst", random_bytes(6 * 1024 * 1024 + 4321) },
      { "000013.sst", random_bytes(300000) },
      { "CURRENT", "MANIFEST-000005\n" },
      { "MANIFEST-000005", random_bytes(1234) },
      { "OPTIONS-000007", "[Version]\n" },
      { "empty.log", "" },
    }
    make_snapshot(work .. "/snap", files)
    local st, out, err = fetch(work .. "/snap", work .. "/dest", { "--parallel", "2" })
    assert.equal(0, st, err)
    local total = 0
    for _, f in ipairs(files) do total = total + #f[2] end
    assert.truthy(out:match("^fetched 6 files, " .. total .. " bytes in %d+ ms, [%d.]+ MB/s\n$"),
                  out)
    for _, f in ipairs(files) do
      local got = helpers.read_file(work .. "/dest/" .. f[1])
      assert.equal(#f[2], got and #got)
      assert.truthy(got == f[2], f[1] .. " differs")
    end
    -- nothing else: no .part, no manifest (the caller fetched and parsed it itself)
    assert.equal(6, #ls(work .. "/dest"))
    -- --dest must be new or empty
    st, out, err = fetch(work .. "/snap", work .. "/dest")
    refused(st, out, err, "--dest " .. work .. "/dest is not empty: refused")
  end)

  it("refuses a host whose key differs from known_hosts", function()
    local other = sshd_fixture.keygen(work .. "/other_host_key")
    local kh = work .. "/kh_changed"
    helpers.write_file(kh, sshd_fixture.known_hosts_line(sshd.port, other .. ".pub"))
    local st, out, err = fetch(work .. "/snap", work .. "/d-changed", nil, kh)
    refused(st, out, err, string.format(
      "host key of 127.0.0.1:%d does not match known_hosts %s (changed key?): refused",
      sshd.port, kh))
    assert.same({}, ls(work .. "/d-changed"))
  end)

  it("refuses a host that is not in known_hosts (no trust on first use)", function()
    local kh = work .. "/kh_empty"
    helpers.write_file(kh, "# nothing\n[127.0.0.1]:1 ssh-ed25519 " ..
                           "AAAAC3NzaC1lZDI1NTE5AAAAIHyXzU5LAj2ahtkJvRMoN2Lo4dexHzNwSSLzRZiPsqHJ\n")
    local st, out, err = fetch(work .. "/snap", work .. "/d-unknown", nil, kh)
    refused(st, out, err, string.format("host 127.0.0.1:%d is not in known_hosts %s: refused",
                                        sshd.port, kh))
    -- and the fetch did not add it
    assert.falsy(helpers.read_file(kh):find(tostring(sshd.port), 1, true))
  end)

  it("refuses a user key that is not in authorized_keys, and a missing key file", function()
    local stranger = sshd_fixture.keygen(work .. "/stranger_key")
    local st, out, err = fetch(work .. "/snap", work .. "/d-key", nil, nil, stranger)
    refused(st, out, err, string.format(
      "127.0.0.1:%d refused public-key authentication of user %s with key %s",
      sshd.port, sshd.user, stranger))
    -- no key material in the message
    local key_text = helpers.read_file(stranger)
    assert.falsy(err:find(key_text:sub(40, 80), 1, true))
    st, out, err = fetch(work .. "/snap", work .. "/d-key", nil, nil, work .. "/no_such_key")
    refused(st, out, err, "private key " .. work .. "/no_such_key: No such file or directory")
  end)

  it("refuses manifest names that leave the snapshot directory", function()
    for i, bad in ipairs { "../escape", "/abs/path" } do
      local dir = work .. "/snap-name" .. i
      make_snapshot(dir, { { "a.sst", "aaaa" } })
      local m = helpers.read_file(dir .. "/beck-manifest")
      helpers.write_file(dir .. "/beck-manifest",
                         (m:gsub("end\n$", "file 4 " .. xxh3("aaaa") .. " " .. bad .. "\nend\n")))
      local st, out, err = fetch(dir, work .. "/d-name" .. i)
      refused(st, out, err, "file name '" .. bad .. "' leaves the snapshot directory: refused")
      assert.same({}, ls(work .. "/d-name" .. i))
    end
    assert.falsy(helpers.read_file(work .. "/escape"))
  end)

  it("refuses a file changed after the manifest was written, and keeps nothing", function()
    local dir = work .. "/snap-corrupt"
    local big = random_bytes(3 * 1024 * 1024)
    make_snapshot(dir, { { "big.sst", big }, { "a.sst", "aaaa" }, { "b.sst", "bbbb" } })
    -- same size, one byte flipped in the middle
    local mid = math.floor(#big / 2)
    helpers.write_file(dir .. "/big.sst", big:sub(1, mid) ..
                       string.char((big:byte(mid + 1) + 1) % 256) .. big:sub(mid + 2))
    local st, out, err = fetch(dir, work .. "/d-corrupt", { "--parallel", "1" })
    local expected = xxh3(big)
    local actual = xxh3(helpers.read_file(dir .. "/big.sst"))
    refused(st, out, err, string.format(
      "big.sst: checksum %s, expected %s: refused (fetched from 127.0.0.1:%d:%s/big.sst)",
      actual, expected, sshd.port, dir))
    assert.same({}, ls(work .. "/d-corrupt")) -- neither big.sst(.part) nor a.sst, b.sst
  end)

  it("refuses a symlink, a size that differs and a missing file", function()
    local dir = work .. "/snap-link"
    make_snapshot(dir, { { "a.sst", "aaaa" }, { "target", "secret" } },
                  { { "a.sst", "aaaa" }, { "link.sst", "secret" } })
    assert(os.execute("ln -s target '" .. dir .. "/link.sst'") == 0)
    local st, out, err = fetch(dir, work .. "/d-link", { "--parallel", "1" })
    refused(st, out, err, string.format("link.sst: 127.0.0.1:%d:%s/link.sst is a symlink: refused",
                                        sshd.port, dir))
    assert.same({}, ls(work .. "/d-link"))

    dir = work .. "/snap-size"
    make_snapshot(dir, { { "a.sst", "aaaa" } }, { { "a.sst", "aaaaa" } })
    st, out, err = fetch(dir, work .. "/d-size")
    refused(st, out, err, string.format(
      "a.sst: 127.0.0.1:%d:%s/a.sst has 4 bytes, the manifest says 5: refused", sshd.port, dir))

    dir = work .. "/snap-missing"
    make_snapshot(dir, { { "a.sst", "aaaa" } }, { { "a.sst", "aaaa" }, { "gone.sst", "x" } })
    st, out, err = fetch(dir, work .. "/d-missing")
    refused(st, out, err, "gone.sst: 127.0.0.1:" .. sshd.port .. ":" .. dir ..
                          "/gone.sst: no such file")
    assert.same({}, ls(work .. "/d-missing"))

    st, out, err = fetch(work .. "/no-such-dir", work .. "/d-nodir")
    refused(st, out, err, "127.0.0.1:" .. sshd.port .. ":" .. work ..
                          "/no-such-dir/beck-manifest: no such file")
    assert.falsy(helpers.read_file(work .. "/d-nodir")) -- made for the fetch, removed again
  end)

  it("holds --rate-limit", function()
    local dir = work .. "/snap-rate"
    make_snapshot(dir, { { "r1.sst", random_bytes(2000000) }, { "r2.sst", random_bytes(2000000) } })
    local st, out, err, took = fetch(dir, work .. "/d-rate", { "--rate-limit", "2M",
                                                                "--parallel", "2" })
    assert.equal(0, st, err)
    assert.truthy(out:match("^fetched 2 files, 4000000 bytes"), out)
    -- 4 MB at 2 MB/s: ~2 s less a 0.2 MB burst (and the handshakes come on top)
    assert.truthy(took >= 1.5, "took only " .. took .. " s")
    assert.truthy(took < 8, "took " .. took .. " s")
    -- progress lines about once a second
    local progress = "beck fetch: %d+ of 4000000 bytes %([%d.]+%%%), [%d.]+ MB/s, %d+ s left"
    assert.truthy(err:match(progress), err)
  end)

  it("fails cleanly when the SSH session drops in the middle of a file", function()
    local dir = work .. "/snap-drop"
    make_snapshot(dir, { { "d1.sst", random_bytes(3000000) }, { "d2.sst", "dd" } })
    local proc = helpers.spawn({ helpers.beck_bin(), "fetch", "--host", "127.0.0.1",
                                 "--port", sshd.port, "--user", sshd.user, "--key", sshd.key,
                                 "--known-hosts", sshd.known_hosts, "--remote-dir", dir,
                                 "--dest", work .. "/d-drop", "--rate-limit", "1M",
                                 "--parallel", "1" }, { name = "beck-fetch" })
    -- (log text: the message is the feature, what an operator or a user reads)
    proc:wait_log("beck fetch: [1-9]%d* of 3000002 bytes", 10)
    -- sshd's children (one per connection, started by our sshd) die: the TCP session drops
    local children = helpers.read_file(string.format("/proc/%d/task/%d/children",
                                                     sshd.proc.pid, sshd.proc.pid)) or ""
    local n = 0
    for pid in children:gmatch("%d+") do
      ffi.C.kill(tonumber(pid), 9)
      n = n + 1
    end
    assert.truthy(n >= 1, "sshd has no session child")
    assert.equal(1, proc:wait(10))
    local err = proc:log()
    local last = err:match("([^\n]*)\n?$")
    assert.truthy(last:match("^beck fetch: d1%.sst: reading 127%.0%.0%.1:%d+:.*/d1%.sst " ..
                             "failed after %d+ bytes: the SSH connection was lost$"), err)
    assert.same({}, ls(work .. "/d-drop"))
  end)

  it("gives up on an sshd that hangs, within --timeout-ms, and on a closed port", function()
    sshd.proc:signal(19) -- SIGSTOP: the kernel still accepts connections; nobody answers
    local st, out, err, took = fetch(work .. "/snap", work .. "/d-hang", { "--timeout-ms", "1000" })
    sshd.proc:signal(18) -- SIGCONT
    refused(st, out, err, "SSH handshake with 127.0.0.1:" .. sshd.port .. " failed: timed out")
    assert.truthy(took < 5, "took " .. took .. " s")

    sshd:stop()
    st, out, err, took = fetch(work .. "/snap", work .. "/d-down", { "--timeout-ms", "1000" })
    refused(st, out, err, "cannot connect to 127.0.0.1:" .. sshd.port .. ": Connection refused")
    assert.truthy(took < 5, "took " .. took .. " s")
  end)
end)
