-- Snapshots (runtime/engine/snapshot.c, manifest.c; runtime/replica/install.c): a real wordcount state made by a short node run on the
-- dev broker, snapshotted with `beck snapshot`, its manifest parsed and written back, its
-- files' sizes and XXH3 checked, installed into a fresh state directory and dumped key by key
-- against the original; then every refusal of a bad fetched snapshot (escaping names,
-- missing "end", corrupted, extra, missing files, symbolic links) with the task directory
-- left as it was, an install killed between its steps and put right at the next start, and
-- the sweep of old and incomplete snapshots. Under ASan too:
-- make SAN=1 build/san/beck && BECK_BIN=build/san/beck build/san/beck test <this file>.
local helpers = require "spec.helpers"
local cjson = require "cjson"
local ffi = require "ffi"
require "beck.internal.runtime" -- loads the cdefs
local C = ffi.C

local WORDCOUNT = "scripts/examples/wordcount.lua"
local APP = "wordcount"
local MANIFEST = "beck-manifest"

local errp = ffi.new("const char *[1]")
local h64 = ffi.new("uint64_t[1]")
local size64 = ffi.new("uint64_t[1]")

-- -- Helpers ---------------------------------------------------------------------------------

local function sh(cmd)
  local ok = os.execute(cmd)
  assert(ok == true or ok == 0, "failed: " .. cmd)
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function exists(path) return os.rename(path, path) == true end

local function output(cmd)
  local p = io.popen(cmd)
  local s = p:read("*a")
  p:close()
  return s
end

-- The whole tree under dir, and the names in dir.
local function listing(dir) return output("cd " .. q(dir) .. " && find . | sort") end
local function ls(dir)
  local names = {}
  for name in output("ls -A " .. q(dir)):gmatch("[^\n]+") do names[#names + 1] = name end
  return names
end

local function file_size(path)
  local f = assert(io.open(path, "rb"))
  local n = f:seek("end")
  f:close()
  return n
end

local function dump(state, task)
  local st, out, err = helpers.run({ helpers.beck_bin(), "dump", "--state-dir", state, "--app",
                                     APP, "--task", task })
  assert(st == 0, "beck dump failed: " .. tostring(err))
  local rows = {}
  for line in out:gmatch("[^\n]+") do rows[#rows + 1] = cjson.decode(line) end
  return rows
end

local function snapshot(args)
  local argv = { helpers.beck_bin(), "snapshot" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return helpers.run(argv)
end

-- The manifest's lines, read in Lua: { files = { {size, hex, name} }, stores = {...} }.
local function read_manifest(dir)
  local text = assert(helpers.read_file(dir .. "/" .. MANIFEST))
  local m = { files = {}, stores = {}, text = text }
  for line in text:gmatch("[^\n]+") do
    local size, hex, name = line:match("^file (%d+) (%x+) (%S+)$")
    if size then m.files[#m.files + 1] = { size = tonumber(size), hex = hex, name = name } end
    if line:match("^store ") then m.stores[#m.stores + 1] = line end
  end
  return m
end

local function xxh3(path)
  assert(C.bk_ffi_snapshot_file_xxh3(path, h64, size64, errp) == 0, ffi.string(errp[0]))
  return string.format("%016x", h64[0]), tonumber(size64[0])
end

local function install(fetched, task_dir)
  if C.bk_ffi_snapshot_install(fetched, task_dir, errp) == 0 then return true end
  return nil, ffi.string(errp[0])
end

local function rewrite(in_path, out_path)
  local n = C.bk_ffi_snapshot_manifest_rewrite(in_path, out_path, errp)
  if n >= 0 then return n end
  return nil, ffi.string(errp[0])
end

-- Replaces the first line of the manifest in dir that matches pattern.
local function edit_manifest(dir, pattern, repl)
  local path = dir .. "/" .. MANIFEST
  local text, n = helpers.read_file(path):gsub(pattern, repl, 1)
  assert(n == 1, "no " .. pattern .. " in the manifest")
  helpers.write_file(path, text)
end

-- -- The state: one short wordcount run ------------------------------------------------------

local state, snap_root, snap -- the node's state dir, where snapshots go, the first one
local bootstrap -- the broker's

local function input_done(bs, n)
  local total = 0
  for _, o in pairs(helpers.committed(bs, "text-lines", APP)) do total = total + o end
  return total == n
end

describe("snapshot", function()
  setup(function()
    local broker = helpers.start_broker { topics = { "text-lines:2" } }
    local bs = broker.bootstrap
    bootstrap = bs
    local function word(n) -- wordcount counts runs of letters
      return string.char(97 + n % 26, 97 + math.floor(n / 26) % 26)
    end
    local lines = {}
    for i = 1, 3000 do
      lines[i] = { "k" .. i % 7, table.concat({ word(i % 401), word(i % 37), word(i % 5) }, " ") }
    end
    helpers.produce(bs, "text-lines", lines, { timeout = 60 })
    state = helpers.tmpdir()
    snap_root = helpers.tmpdir() .. "/snapshots"
    local node = helpers.start_node(WORDCOUNT, { "-b", bs, "--state-dir", state,
                                                 "--commit-interval-ms", "200" })
    node:wait_running(30)
    helpers.eventually(function() return input_done(bs, #lines) end, 60, 0.3)
    -- a running node holds its DB: no snapshot of it from outside
    local st, _, err = snapshot { "--state-dir", state, "--app", APP, "--task", "0_0",
                                  "--out", snap_root }
    assert.equal(1, st)
    assert.matches("is a node running on it", err, 1, true)
    assert.equal(0, node:stop())
  end)
  teardown(helpers.cleanup)

  it("of a stopped node's task installs into a fresh state that dumps the same", function()
    local st, out, err = snapshot { "--state-dir", state, "--app", APP, "--task", "0_0",
                                    "--out", snap_root, "--topology", WORDCOUNT }
    assert.equal(0, st, err)
    local dir = out:match("^([^\n]+)\n")
    snap = dir
    local id = out:match("\nid (%S+)\n")
    local nfiles = tonumber(out:match("\nfiles (%d+)\n"))
    local bytes = tonumber(out:match("\nbytes (%d+)\n"))
    assert.equal(snap_root .. "/" .. id, dir)
    assert.matches("^0_0%-%d+%-%d+$", id)
    assert.is_true(nfiles >= 4) -- CURRENT, MANIFEST-*, OPTIONS-*, at least one SST

    -- the manifest, read in Lua, against the files
    local m = read_manifest(dir)
    assert.equal(nfiles, #m.files)
    local sum, ssts = 0, 0
    for _, f in ipairs(m.files) do
      assert.equal(f.size, file_size(dir .. "/" .. f.name), f.name)
      local hex, size = xxh3(dir .. "/" .. f.name)
      assert.equal(f.hex, hex, f.name)
      assert.equal(f.size, size, f.name)
      sum = sum + f.size
      if f.name:match("%.sst$") then ssts = ssts + 1 end
    end
    assert.equal(bytes, sum)
    assert.is_true(ssts >= 1)
    -- the snapshot holds exactly the listed files and the manifest
    local n = 0
    for _, name in ipairs(ls(dir)) do
      n = n + 1
      assert.is_true(name == MANIFEST or m.text:find(" " .. name .. "\n", 1, true) ~= nil, name)
    end
    assert.equal(nfiles + 1, n)

    -- the store line carries the task's checkpoint offsets (changelog next, inputs)
    assert.equal(1, #m.stores)
    local cp = helpers.read_file(state .. "/" .. APP .. "/0_0/checkpoint")
    local next_, inputs = cp:match("\ncounts (%d+) (.-)\n")
    assert.is_not_nil(next_, cp)
    assert.equal(string.format("store counts changelog wordcount-counts-changelog 0 next %s " ..
                               "inputs %s", next_, inputs), m.stores[1])
    assert.is_true(tonumber(next_) > 0)
    assert.matches("^1 %d+$", inputs) -- the task reads one input partition

    -- parse + write round trip, byte for byte
    local again = helpers.tmpdir() .. "/m"
    assert.equal(nfiles, rewrite(dir .. "/" .. MANIFEST, again))
    assert.equal(m.text, helpers.read_file(again))

    -- fetched (here: copied), installed into a fresh state directory
    local fetched = helpers.tmpdir() .. "/fetched"
    sh("cp -r " .. q(dir) .. " " .. q(fetched))
    local state2 = helpers.tmpdir()
    local task_dir = state2 .. "/" .. APP .. "/0_0"
    assert(install(fetched, task_dir))
    assert.is_false(exists(fetched))
    assert.equal(cp, helpers.read_file(task_dir .. "/checkpoint"))
    local orig = dump(state, "0_0")
    assert.is_true(#orig > 50, #orig)
    assert.same(orig, dump(state2, "0_0"))

    -- bk_db_open reads that checkpoint: a snapshot of the installed state says the same
    local st2, out2, err2 = snapshot { "--state-dir", state2, "--app", APP, "--task", "0_0",
                                       "--out", helpers.tmpdir() }
    assert.equal(0, st2, err2)
    assert.equal(m.stores[1], out2:match("\n(store [^\n]+)\n"))

    -- installed over an existing task directory (task 0_1's state): replaced, no trash left
    local state3 = helpers.tmpdir()
    sh("mkdir -p " .. q(state3 .. "/" .. APP) .. " && cp -r " ..
       q(state .. "/" .. APP .. "/0_1") .. " " .. q(state3 .. "/" .. APP .. "/0_0"))
    assert.are_not.same(orig, dump(state3, "0_0"))
    local fetched2 = helpers.tmpdir() .. "/fetched"
    sh("cp -r " .. q(dir) .. " " .. q(fetched2))
    assert(install(fetched2, state3 .. "/" .. APP .. "/0_0"))
    assert.same(orig, dump(state3, "0_0"))
    assert.same({ "0_0" }, ls(state3 .. "/" .. APP))
  end)

  describe("install refuses, and leaves the task directory as it was,", function()
    local task_dir, before

    -- a fresh copy of the snapshot as if fetched, and a task directory with state in it
    local function fetched_copy()
      assert(snap, "the first test makes the snapshot")
      local d = helpers.tmpdir() .. "/fetched"
      sh("cp -r " .. q(snap) .. " " .. q(d))
      task_dir = helpers.tmpdir() .. "/" .. APP .. "/0_0"
      sh("mkdir -p " .. q(task_dir) .. " && cp -r " .. q(state .. "/" .. APP .. "/0_1") ..
         "/. " .. q(task_dir))
      before = listing(task_dir)
      return d
    end

    local function refused(d, pattern)
      local ok, err = install(d, task_dir)
      assert.is_nil(ok)
      assert.matches(pattern, err)
      assert.equal(before, listing(task_dir))
      assert.is_true(exists(d)) -- the fetched directory stays for a look
      return err
    end

    local function first_sst(d)
      for _, f in ipairs(read_manifest(d).files) do
        if f.name:match("%.sst$") then return f end
      end
    end

    it("a file name '../escape'", function()
      local d = fetched_copy()
      edit_manifest(d, "\nfile (%d+) (%x+) [^\n]+\n", "\nfile %1 %2 ../escape\n")
      local err = refused(d, "^manifest line %d+: file name '%.%./escape' leaves the " ..
                             "snapshot directory: refused$")
      assert.matches("line 6:", err) -- 4 header lines, one store line, then the first file
    end)

    it("a file name '/etc/passwd'", function()
      local d = fetched_copy()
      edit_manifest(d, "\nfile (%d+) (%x+) [^\n]+\n", "\nfile %1 %2 /etc/passwd\n")
      refused(d, "file name '/etc/passwd' leaves the snapshot directory: refused")
    end)

    it("a file name 'a/b'", function()
      local d = fetched_copy()
      edit_manifest(d, "\nfile (%d+) (%x+) [^\n]+\n", "\nfile %1 %2 a/b\n")
      refused(d, "file name 'a/b' leaves the snapshot directory: refused")
    end)

    it("a manifest without 'end'", function()
      local d = fetched_copy()
      edit_manifest(d, "end\n$", "")
      refused(d, "^manifest line %d+: no 'end': the manifest is cut short: refused$")
    end)

    it("a file with a corrupted byte", function()
      local d = fetched_copy()
      local f = first_sst(d)
      local path = d .. "/" .. f.name
      local s = helpers.read_file(path)
      local at = math.floor(#s / 2)
      helpers.write_file(path, s:sub(1, at) .. string.char((s:byte(at + 1) + 1) % 256) ..
                               s:sub(at + 2))
      refused(d, "^" .. f.name:gsub("%.", "%%.") .. ": checksum %x+, expected " .. f.hex ..
                 ": refused$")
    end)

    it("a file cut short", function()
      local d = fetched_copy()
      local f = first_sst(d)
      local s = helpers.read_file(d .. "/" .. f.name)
      helpers.write_file(d .. "/" .. f.name, s:sub(1, #s - 1))
      refused(d, f.name:gsub("%.", "%%.") .. ": " .. (f.size - 1) .. " bytes, expected " ..
                 f.size .. ": refused")
    end)

    it("a listed file that is missing", function()
      local d = fetched_copy()
      local f = first_sst(d)
      os.remove(d .. "/" .. f.name)
      refused(d, f.name:gsub("%.", "%%.") .. ": missing: refused")
    end)

    it("an extra file the manifest does not list", function()
      local d = fetched_copy()
      helpers.write_file(d .. "/000099.sst", "extra")
      refused(d, "^000099%.sst: not in the manifest: refused$")
    end)

    it("a symbolic link in place of a listed file", function()
      local d = fetched_copy()
      local f = first_sst(d)
      sh("mv " .. q(d .. "/" .. f.name) .. " " .. q(d .. "/../real.sst") .. " && ln -s " ..
         q(d .. "/../real.sst") .. " " .. q(d .. "/" .. f.name))
      refused(d, "^" .. f.name:gsub("%.", "%%.") .. ": a symbolic link: refused$")
    end)

    it("another task's directory", function()
      local d = fetched_copy()
      task_dir = task_dir:gsub("0_0$", "0_1")
      sh("mkdir -p " .. q(task_dir))
      before = listing(task_dir)
      refused(d, "^a snapshot of task 0_0 cannot become .*/0_1: refused$")
    end)

    it("a directory in the fetched directory", function()
      local d = fetched_copy()
      sh("mkdir " .. q(d .. "/sub"))
      refused(d, "^sub: not a regular file: refused$")
    end)
  end)

  describe("the manifest parser", function()
    local good

    local function parse(text)
      local path = helpers.tmpdir() .. "/m"
      helpers.write_file(path, text)
      return rewrite(path, nil)
    end

    before_each(function()
      good = { "beck-snapshot 1", "task 0_3", "id 0_3-1764729600000-4242",
               "created_ms 1764729600000",
               "store count changelog wc-count-changelog 3 next 12345 inputs 2 999 -1",
               "file 1048576 0123456789abcdef 000012.sst", "file 0 ffffffffffffffff CURRENT",
               "end" }
    end)

    local function with(i, line)
      local t = {}
      for j, l in ipairs(good) do t[j] = l end
      if line == false then table.remove(t, i) else t[i] = line end
      return table.concat(t, "\n") .. "\n"
    end

    it("reads the header's example, and writes it back unchanged", function()
      local path = helpers.tmpdir() .. "/m"
      helpers.write_file(path, with(1, good[1]))
      assert.equal(2, rewrite(path, path .. "2"))
      assert.equal(with(1, good[1]), helpers.read_file(path .. "2"))
    end)

    it("refuses what it does not know, naming the line", function()
      local cases = {
        { 1, "beck-snapshot 2", "^manifest line 1: manifest version '2' is not supported" },
        { 1, "hello", "^manifest line 1: not a beck snapshot manifest" },
        { 6, "file 1 0123456789abcdeg 000012.sst", "^manifest line 6: checksum " ..
          "'0123456789abcdeg' is not 16 hex digits: refused$" },
        { 6, "file 1 0123456789abcde 000012.sst", "line 6: checksum .* not 16 hex digits" },
        { 6, "file -1 0123456789abcdef 000012.sst", "line 6: file size '%-1' is not" },
        { 6, "file 1 0123456789abcdef x", nil },
        { 7, "file 1 0123456789abcdef 000012.sst", "^manifest line 7: file '000012%.sst' " ..
          "listed twice %(also on line 6%): refused$" },
        { 7, "file 1 0123456789abcdef beck-manifest", "line 7: the manifest lists itself" },
        { 7, "file 1 0123456789abcdef .", "line 7: file name '%.' is not one path component" },
        { 7, "file 1 0123456789abcdef ..", "line 7: file name '%.%.' leaves the snapshot" },
        { 7, "file 1 0123456789abcdef a b", "line 7: expected 'file SIZE XXH3 NAME'" },
        { 7, "file  1 0123456789abcdef ab", "line 7: stray spaces" },
        { 7, "file 1 0123456789abcdef " .. ("x"):rep(256), "line 7: file name 'xxxx.*' is not" },
        { 7, "frobnicate 1", "^manifest line 7: unknown line kind 'frobnicate': refused$" },
        { 7, "", "line 7: an empty line" },
        { 5, "store count changelog wc-count-changelog 3 next 1 inputs 17" ..
          (" 1"):rep(17), "^manifest line 5: input count '17' is not an integer in 0%.%.16" },
        { 5, "store count changelog wc-count-changelog 3 next 1 inputs 20" ..
          (" 1"):rep(20), "line 5: stray spaces or too many fields" },
        { 5, "store count changelog wc-count-changelog 3 next 1 inputs 17 1",
          "^manifest line 5: input count '17' is not an integer in 0%.%.16: refused$" },
        { 5, "store count changelog wc-count-changelog 3 next 1 inputs 2 1",
          "line 5: 1 input offsets where 2 are announced" },
        { 5, "store c/d changelog wc-count-changelog 3 next 1 inputs 0",
          "line 5: store name 'c/d' leaves" },
        { 5, "store count changelog ../x 3 next 1 inputs 0", "line 5: changelog name '%.%./x'" },
        { 5, "store count changelog t 3 next -2 inputs 0", "line 5: partition must be" },
        { 2, "task ../0_3", "line 2: task '%.%./0_3' leaves" },
        { 3, "id a/b", "line 3: id 'a/b' leaves" },
        { 4, "created_ms -5", "line 4: created_ms takes one integer >= 0" },
        { 4, false, "line 7: no 'created_ms' line before 'end'" },
        { 8, false, "^manifest line 8: no 'end': the manifest is cut short: refused$" },
        { 8, "end 1", "line 8: 'end' takes no value" },
      }
      for _, c in ipairs(cases) do
        local n, err = parse(with(c[1], c[2]))
        if c[3] then
          assert.is_nil(n, tostring(c[2]))
          assert.matches(c[3], err)
        else
          assert.equal(2, n, err) -- "x" is a fine name
        end
      end
      -- a store listed twice; text after "end"; a NUL byte; a CR
      local n, err = parse(with(6, good[5] .. "\n" .. good[6]))
      assert.is_nil(n)
      assert.matches("line 6: store 'count' listed twice", err)
      n, err = parse(with(8, "end\nfile 1 0123456789abcdef late"))
      assert.matches("line 9: text after 'end': refused", err)
      n, err = parse(with(7, "file 1 0123456789abcdef a\0b"))
      assert.matches("line 7: a NUL or CR byte", err)
      n, err = parse(table.concat(good, "\r\n"))
      assert.matches("line 1: a NUL or CR byte", err)
      assert.is_nil(parse(""))
    end)

    it("refuses more than 100,000 files", function()
      local t = { good[1], good[2], good[3], good[4] }
      for i = 1, 100001 do t[#t + 1] = string.format("file 1 0123456789abcdef f%d", i) end
      t[#t + 1] = "end"
      local n, err = parse(table.concat(t, "\n"))
      assert.is_nil(n)
      assert.matches("^manifest line 100005: more than 100000 files: refused$", err)
      t[100005], t[100006] = "end", nil
      assert.equal(100000, parse(table.concat(t, "\n")))
    end)

    it("hashes with XXH3-64 (the empty input's known value), reading large files whole",
       function()
      local d = helpers.tmpdir()
      helpers.write_file(d .. "/empty", "")
      local hex, size = xxh3(d .. "/empty")
      assert.equal("2d06800538d394c2", hex) -- XXH3_64bits(""), not XXH64's ef46db3751d8e999
      assert.equal(0, size)
      local big = ("0123456789abcdef"):rep(3 * 65536 + 7) -- past several 1 MiB reads
      helpers.write_file(d .. "/big", big)
      local h1, s1 = xxh3(d .. "/big")
      assert.equal(#big, s1)
      helpers.write_file(d .. "/big2", big:sub(1, -2) .. "g")
      assert.are_not.equal(h1, (xxh3(d .. "/big2")))
      assert.equal(-1, C.bk_ffi_snapshot_file_xxh3(d .. "/nope", h64, size64, errp))
      assert.matches("nope: missing", ffi.string(errp[0]))
    end)
  end)

  it("sweep removes old and incomplete snapshots and keeps fresh ones", function()
    assert(snap, "the first test makes the snapshot")
    local root = helpers.tmpdir() .. "/snaps"
    sh("mkdir -p " .. q(root))
    -- fresh: `beck snapshot` twice; old: a copy whose manifest says it was made long ago
    for _ = 1, 2 do
      local st, _, err = snapshot { "--state-dir", state, "--app", APP, "--task", "0_1",
                                    "--out", root }
      assert.equal(0, st, err)
    end
    sh("cp -r " .. q(snap) .. " " .. q(root .. "/old"))
    edit_manifest(root .. "/old", "\ncreated_ms %d+\n", "\ncreated_ms 1000\n")
    -- incomplete (no manifest): one old by its mtime, one fresh
    sh("mkdir " .. q(root .. "/cut-old") .. " && touch " .. q(root .. "/cut-old/000001.sst") ..
       " && touch -d '2 hours ago' " .. q(root .. "/cut-old"))
    sh("mkdir " .. q(root .. "/cut-new") .. " && touch " .. q(root .. "/cut-new/000001.sst"))
    helpers.write_file(root .. "/stray-file", "not a snapshot") -- not a directory: left alone

    local now = C.bk_ffi_clock_ms()
    assert.equal(2, C.bk_ffi_snapshot_sweep(root, 3600 * 1000 - 60 * 1000, now))
    assert.is_false(exists(root .. "/old"))
    assert.is_false(exists(root .. "/cut-old"))
    assert.is_true(exists(root .. "/cut-new"))
    assert.is_true(exists(root .. "/stray-file"))
    local left = 0
    for _, name in ipairs(ls(root)) do
      if name:match("^0_1%-") then left = left + 1 end
    end
    assert.equal(2, left)
    -- nothing is old a moment later; once the TTL has passed, everything goes
    assert.equal(0, C.bk_ffi_snapshot_sweep(root, 60 * 1000, now))
    assert.equal(3, C.bk_ffi_snapshot_sweep(root, 1000, now + 2000 + 7200 * 1000))
    assert.same({ "stray-file" }, ls(root))
    assert.equal(0, C.bk_ffi_snapshot_sweep(helpers.tmpdir() .. "/none", 0, now))
  end)

  -- A crash (SIGKILL, spec/fixtures/faultfs.c) at each step of an install that replaces a
  -- task's state, as cold bootstrap does it: the snapshot fetched into <app>/.bootstrap-0_0,
  -- its files moved into rocksdb/ (lay_out), then 0_0 -> 0_0.trash-*, .bootstrap-0_0 -> 0_0,
  -- the trash removed. What is left is put right before any task opens (bk_install_recover,
  -- at a node's start): the task ends with its old state or the new one, whole, and nothing
  -- else stays behind.
  describe("an install a crash interrupts", function()
    -- old_task: whose state stands in 0_0's place before the install (0_1's, so that the old
    -- and the new state differ; 0_0's own, with a marker file, where a node runs on it)
    local function crashed_install(ends_with, when, old_task)
      assert(snap, "the first test makes the snapshot")
      local root = helpers.tmpdir()
      local app_dir = root .. "/" .. APP
      sh("mkdir -p " .. q(app_dir) .. " && cp -r " .. q(state .. "/" .. APP .. "/" ..
         (old_task or "0_1")) .. " " .. q(app_dir .. "/0_0") .. " && cp -r " .. q(snap) ..
         " " .. q(app_dir .. "/.bootstrap-0_0"))
      if old_task == "0_0" then helpers.write_file(app_dir .. "/0_0/old-marker", "old\n") end
      local env = helpers.faultfs(root, "crash")
      env.BECK_FAULT_RENAME, env.BECK_FAULT_WHEN = ends_with, when
      env.BECK_INSTALL_FETCHED = app_dir .. "/.bootstrap-0_0"
      env.BECK_INSTALL_TASK_DIR = app_dir .. "/0_0"
      local st = helpers.run({ helpers.beck_spec_bin(), "test", "spec/fixtures/install_child.lua" },
                             { env = env, timeout = 30 })
      assert.equal(137, st) -- killed where asked, not done nor failed
      return root, app_dir
    end

    local old_state, new_state
    setup(function()
      -- the old state is task 0_1's, put in 0_0's place: dumped as 0_0's
      old_state, new_state = dump(state, "0_1"), dump(state, "0_0")
      for _, row in ipairs(old_state) do row.task = "0_0" end
    end)

    it("between its two renames: a node's start puts the old state back", function()
      -- task 0_0's own old state: its checkpoint matches its changelog and input, so the
      -- node, which has nothing left to read, leaves it as it was
      local root, app_dir = crashed_install("/" .. APP .. "/0_0", "after", "0_0")
      local names = ls(app_dir)
      table.sort(names)
      assert.equal(2, #names, table.concat(names, " "))
      assert.equal(".bootstrap-0_0", names[1])
      assert.matches("^0_0%.trash%-%d+%-%d+$", names[2])
      -- beck run on that state directory (it reads what is left of the input: nothing)
      local node = helpers.start_node(WORDCOUNT, { "-b", bootstrap, "--state-dir", root })
      -- (log text: the message is the feature, what an operator or a user reads)
      node:wait_log("a crash interrupted the install of a snapshot between its two renames", 30)
      node:wait_log("removing [^\n]*%.bootstrap%-0_0, a snapshot fetch a crash interrupted", 5)
      node:wait_running(30)
      assert.equal(0, node:stop())
      local after = ls(app_dir)
      table.sort(after)
      assert.same({ "0_0", "0_1" }, after)
      -- the old directory came back (its marker), with its state as it was
      assert.equal("old\n", helpers.read_file(app_dir .. "/0_0/old-marker"))
      assert.same(dump(state, "0_0"), dump(root, "0_0"))
    end)

    it("after its swap: the old state's trash is removed, the new state stays", function()
      local _, app_dir = crashed_install("/.bootstrap-0_0", "after")
      local names = ls(app_dir)
      assert.equal(2, #names, table.concat(names, " "))
      assert.equal(1, C.bk_ffi_install_recover(app_dir))
      assert.same({ "0_0" }, ls(app_dir))
      assert.same(new_state, dump(app_dir:match("^(.*)/[^/]+$"), "0_0"))
    end)

    it("while laying out the fetched files: the fetch is removed, the old state stays", function()
      local _, app_dir = crashed_install("CURRENT", "before")
      local names = ls(app_dir)
      table.sort(names)
      assert.same({ ".bootstrap-0_0", "0_0" }, names)
      assert.equal(1, C.bk_ffi_install_recover(app_dir))
      assert.same({ "0_0" }, ls(app_dir))
      assert.same(old_state, dump(app_dir:match("^(.*)/[^/]+$"), "0_0"))
      assert.equal(0, C.bk_ffi_install_recover(app_dir)) -- nothing more to do
      assert.equal(0, C.bk_ffi_install_recover(app_dir .. "/none")) -- no app directory yet
    end)
  end)

  it("beck snapshot refuses a task without state and bad arguments", function()
    local st, _, err = snapshot { "--state-dir", state, "--app", APP, "--task", "0_9",
                                  "--out", helpers.tmpdir() }
    assert.equal(1, st)
    assert.matches("no state of task 0_9", err, 1, true)
    st, _, err = snapshot { "--state-dir", state, "--app", APP, "--task", "nine" }
    assert.equal(2, st)
    assert.matches("--task takes SUBTOPOLOGY_PARTITION", err, 1, true)
    st = snapshot { "--state-dir", state }
    assert.equal(2, st)
  end)
end)
