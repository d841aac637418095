-- spec/helpers.lua: the one facade of the integration specs. It starts dev
-- brokers and nodes as separate processes (by PID, through LuaJIT's FFI to
-- libc: posix_spawnp, kill, waitpid), talks to the dev broker's control
-- channel, writes and reads topics through an OUTSIDE client
-- (spec/fixtures/kafka_client.py on /usr/bin/python3 with python3-kafka, not
-- librdkafka), and waits with `eventually` instead of sleeping.
--
--   local helpers = require "spec.helpers"
--   after_each(helpers.cleanup)                -- kills what a spec started
--   local broker = helpers.start_broker { brokers = 3, topics = { "in:4" } }
--   local node = helpers.start_node("t.lua", { "-b", broker.bootstrap })
--   helpers.produce(broker.bootstrap, "in", { { "k", "v" } })
--   helpers.eventually(function() return helpers.count(broker.bootstrap, "out") == 1 end)
--   assert.equal(0, node:stop())
--
-- Processes:  spawn, run, start_broker, start_node, cleanup, beck_bin
--             proc.pid, :wait, :stop, :kill, :alive, :log, :stdout, :wait_log
--             broker.bootstrap, .control_port, :control, :create_topic,
--             :broker_down, :broker_up; node:dev_broker, :wait_running
-- Backends:   backend, real_kafka, kafka (a real Apache Kafka cluster)
-- Kafka:      produce, consume, count, committed, metadata, offsets, configs,
--             control
--
-- Backends: BECK_SPEC_BACKEND=kafka makes start_broker start a real Apache
-- Kafka (KRaft, scripts/kafka) instead of the dev broker, with the same
-- interface: bootstrap, create_topic, broker_down/broker_up (SIGKILL and
-- restart of a broker process); only :control, the dev broker's own channel,
-- has no equivalent. Default: the dev broker. A spec that needs the dev
-- broker says so in its header and asks helpers.backend().
-- Waiting:    eventually, with_timeout, sleep, now, trace
-- Files:      tmpdir, workdir, read_file, write_file
--
-- Everything listens on 127.0.0.1 and every wait is bounded. Exit statuses
-- are numbers: the exit code, or 128 + the signal for a process that a
-- signal ended (as a shell reports it). BECK_SPEC_KEEP=1 keeps the
-- temporary directories (logs) of the specs for a look afterwards;
-- BECK_SPEC_VERBOSE=1 prints trace() lines.
local ffi = require "ffi"
local bit = require "bit"
local cjson = require "cjson.safe"

local C = ffi.C
local unpack = unpack or table.unpack
local function pack(...) return { n = select("#", ...), ... } end
local helpers = {}

-- -- libc through FFI -------------------------------------------------------
-- busted reloads this module (and each spec file) per spec file, but FFI declarations
-- live as long as the VM, and another module (beck.internal.cdef) may have declared some
-- already: a second ffi.cdef of a name raises "attempt to redefine". helpers.cdef(decl)
-- declares decl unless the name it declares is known already; any other error (a typo in
-- a declaration) is raised.

-- The name a declaration declares: a typedef's or a variable's last identifier, or a
-- function's name.
local function declared_name(decl)
  local fn = decl:match("([%w_]+)%s*%b()%s*;%s*$")
  if fn and not decl:match("^%s*typedef") then return fn, false end
  return decl:match("([%w_]+)%s*;%s*$"), decl:match("^%s*typedef") ~= nil
end

function helpers.cdef(decl)
  local name, is_type = declared_name(decl)
  assert(name, "helpers.cdef: cannot tell what this declares: " .. decl)
  local known
  if is_type then
    known = pcall(ffi.typeof, name)
  else
    known = pcall(function() return C[name] end)
  end
  if not known then ffi.cdef(decl) end
end

local CDEFS = {
  "typedef struct { int64_t tv_sec; int64_t tv_nsec; } bk_spec_timespec_t;",
  "typedef struct { uint16_t family; uint16_t port; uint32_t addr; uint8_t zero[8]; } " ..
    "bk_spec_sockaddr_in_t;",
  "typedef struct { int fd; short events; short revents; } bk_spec_pollfd_t;",
  "int posix_spawn_file_actions_init(void *fa);",
  "int posix_spawn_file_actions_destroy(void *fa);",
  "int posix_spawn_file_actions_addopen(void *fa, int fd, const char *path, int oflag, " ..
    "unsigned int mode);",
  "int posix_spawnattr_init(void *attr);",
  "int posix_spawnattr_destroy(void *attr);",
  "int posix_spawnattr_setflags(void *attr, short flags);",
  "int posix_spawnattr_setsigmask(void *attr, const void *sigmask);",
  "int posix_spawnattr_setsigdefault(void *attr, const void *sigdefault);",
  "int posix_spawnattr_setpgroup(void *attr, int pgroup);",
  "int posix_spawnp(int *pid, const char *file, const void *fa, const void *attr, " ..
    "char *const argv[], char *const envp[]);",
  "int sigemptyset(void *set);",
  "int sigaddset(void *set, int signo);",
  "int kill(int pid, int sig);",
  "int waitpid(int pid, int *status, int options);",
  "char *mkdtemp(char *tmpl);",
  "int clock_gettime(int clk, void *ts);",
  "int poll(void *fds, unsigned long nfds, int timeout);",
  "int socket(int domain, int type, int protocol);",
  "int connect(int fd, const void *addr, unsigned int len);",
  "long send(int fd, const void *buf, size_t len, int flags);",
  "long recv(int fd, void *buf, size_t len, int flags);",
  "int close(int fd);",
  "char *strerror(int errnum);",
  "extern char **environ;",
}
for _, d in ipairs(CDEFS) do helpers.cdef(d) end

-- Linux (x86_64 and aarch64 share these values).
local O_RDONLY, O_WRONLY, O_CREAT, O_TRUNC = 0, 1, 0x40, 0x200
local POSIX_SPAWN_SETPGROUP, POSIX_SPAWN_SETSIGDEF, POSIX_SPAWN_SETSIGMASK = 0x02, 0x04, 0x08
local WNOHANG = 1
local CLOCK_MONOTONIC = 1
local AF_INET, SOCK_STREAM, POLLIN, MSG_NOSIGNAL = 2, 1, 1, 0x4000
local SIG = { HUP = 1, INT = 2, KILL = 9, PIPE = 13, TERM = 15, CHLD = 17 }
helpers.SIG = SIG

local function errno_text()
  return ffi.string(C.strerror(ffi.errno()))
end

-- -- Time -------------------------------------------------------------------

local ts = ffi.new("bk_spec_timespec_t")

-- Monotonic clock, seconds.
function helpers.now()
  C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) / 1e9
end

local now = helpers.now
local deadline -- set by with_timeout: no wait of the helpers goes past it

local function check_deadline()
  if deadline and now() > deadline.at then
    error(string.format("with_timeout: the %gs budget is spent", deadline.seconds), 0)
  end
end

function helpers.sleep(seconds)
  check_deadline()
  C.poll(nil, 0, math.max(0, math.floor(seconds * 1000 + 0.5)))
  check_deadline()
end

local t0 = now()
-- trace(fmt, ...): a timestamped line on stderr when BECK_SPEC_VERBOSE is set,
-- to see where a slow spec spends its time.
function helpers.trace(fmt, ...)
  if os.getenv("BECK_SPEC_VERBOSE") then
    io.stderr:write(string.format("[%7.3f] ", now() - t0), string.format(fmt, ...), "\n")
  end
end

-- eventually(fn, timeout_s = 10, interval_s = 0.1): calls fn until it returns
-- a truthy value without raising, and returns what it returned. Fails with
-- fn's last error (or "returned false") once timeout_s has passed.
function helpers.eventually(fn, timeout, interval)
  timeout, interval = timeout or 10, interval or 0.1
  local start, last = now(), "it never ran"
  while true do
    local res = pack(pcall(fn))
    if res[1] and res[2] then return unpack(res, 2, res.n) end
    if res[1] then
      last = "returned " .. tostring(res[2]) .. (res[3] ~= nil and (": " .. tostring(res[3])) or "")
    else
      last = tostring(res[2])
    end
    if now() - start > timeout then
      error(string.format("eventually: not true after %gs; last: %s", timeout, last), 2)
    end
    helpers.sleep(interval)
  end
end

-- with_timeout(seconds, fn, ...): runs fn(...) and fails it once `seconds`
-- have passed: every wait in these helpers checks the budget, and a count
-- hook interrupts Lua code that loops. Compiled traces do not run hooks, so
-- the JIT is off meanwhile. A blocking C call cannot be interrupted.
function helpers.with_timeout(seconds, fn, ...)
  local saved_deadline = deadline
  local mine = { at = now() + seconds, seconds = seconds }
  if not saved_deadline or mine.at < saved_deadline.at then deadline = mine end
  local hook, mask, count = debug.gethook()
  local jit_was_on = jit.status()
  jit.off()
  jit.flush()
  debug.sethook(function()
    if deadline and now() > deadline.at then
      debug.sethook(hook, mask, count)
      error(string.format("with_timeout: the %gs budget is spent", deadline.seconds), 2)
    end
  end, "", 10000)
  local res = pack(pcall(fn, ...))
  debug.sethook(hook, mask, count)
  if jit_was_on and not saved_deadline then jit.on() end
  deadline = saved_deadline
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

-- -- Files ------------------------------------------------------------------

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end
helpers.read_file = read_file

local function write_file(path, s)
  local f = assert(io.open(path, "wb"))
  assert(f:write(s))
  f:close()
end
helpers.write_file = write_file

local function tail(s, n)
  s = s or ""
  n = n or 3000
  if #s <= n then return s end
  return "..." .. s:sub(-n)
end

local registry = { procs = {}, dirs = {}, workdir = nil, seq = 0 }

-- A fresh directory under /tmp, removed by cleanup() (unless BECK_SPEC_KEEP).
function helpers.tmpdir()
  local tmpl = ffi.new("char[?]", 64, "/tmp/beck-spec-XXXXXX")
  if C.mkdtemp(tmpl) == nil then
    error("mkdtemp: " .. errno_text(), 2)
  end
  local path = ffi.string(tmpl)
  registry.dirs[#registry.dirs + 1] = path
  return path
end

-- The directory where process output of the current spec goes.
local function workdir()
  if not registry.workdir then registry.workdir = helpers.tmpdir() end
  return registry.workdir
end
helpers.workdir = workdir

local function rmtree(path)
  assert(path:match("^/tmp/beck%-spec%-"), "refusing to remove " .. path)
  os.execute("rm -rf '" .. path .. "'")
end

-- -- Processes --------------------------------------------------------------

local Proc = {}
Proc.__index = Proc

local status_buf = ffi.new("int[1]")

local function decode_status(st)
  local low = bit.band(st, 0x7f)
  if low == 0 then return bit.band(bit.rshift(st, 8), 0xff) end
  return 128 + low
end

-- Reaps the process if it has ended; returns its status or nil.
function Proc:poll()
  if self.status then return self.status end
  local r = C.waitpid(self.pid, status_buf, WNOHANG)
  if r == self.pid then
    self.status = decode_status(status_buf[0])
    self.ended_at = now()
  elseif r < 0 then
    error(string.format("waitpid(%d): %s", self.pid, errno_text()))
  end
  return self.status
end

function Proc:alive()
  return self:poll() == nil
end

-- Waits up to `timeout` s (default 10) for the process to end: its exit
-- status, or nil when it is still running.
function Proc:wait(timeout)
  local limit = now() + (timeout or 10)
  while true do
    local st = self:poll()
    if st then return st end
    if now() >= limit then return nil end
    helpers.sleep(0.02)
  end
end

function Proc:signal(sig)
  if self:poll() then return false end
  if C.kill(self.pid, sig) ~= 0 then
    error(string.format("kill(%d, %d): %s", self.pid, sig, errno_text()), 2)
  end
  return true
end

-- SIGKILL, and reaps it. Returns the status.
function Proc:kill()
  if self:signal(SIG.KILL) then
    local st = self:wait(10)
    if not st then error(string.format("process %d survived SIGKILL", self.pid), 2) end
  end
  return self.status
end

-- Sends `sig` (default SIGTERM) and waits up to `timeout` s (default 20) for
-- the exit status. A process that does not stop in time is killed and the
-- spec fails, with the end of its log.
function Proc:stop(sig, timeout)
  self:signal(sig or SIG.TERM)
  local st = self:wait(timeout or 20)
  if st then return st end
  self:kill()
  error(string.format("%s (pid %d) did not stop within %gs of signal %d; stderr:\n%s",
                      self.name, self.pid, timeout or 20, sig or SIG.TERM, tail(self:log())), 2)
end

-- What the process wrote to stderr (beck's log) and to stdout, so far.
function Proc:log() return read_file(self.stderr_path) or "" end
-- What a failed assertion about a process shows: its ERROR lines (the first 20: the cause
-- is often long before the end) and the end of its log.
function Proc:last_words()
  local log, errors = self:log(), {}
  for line in log:gmatch("[^\n]+") do
    if line:match("^%S+ ERROR ") and #errors < 20 then errors[#errors + 1] = line end
  end
  return "ERROR lines:\n" .. table.concat(errors, "\n") .. "\n-- its log's end:\n" ..
         log:sub(-1500)
end
function Proc:stdout() return read_file(self.stdout_path) or "" end

-- Waits until the log matches a Lua pattern; returns the captures.
function Proc:wait_log(pattern, timeout)
  return helpers.eventually(function()
    local log = self:log()
    local r = { log:match(pattern) }
    if r[1] then return unpack(r) end
    if not self:alive() then
      error(string.format("%s exited with %s before its log showed %q; stderr:\n%s", self.name,
                          tostring(self.status), pattern, tail(log)), 0)
    end
    return nil, string.format("log of %s does not show %q yet:\n%s", self.name, pattern,
                              tail(log, 1500))
  end, timeout or 15, 0.05)
end

local function build_env(extra)
  if not extra then return C.environ end
  local list, seen = {}, {}
  for k, v in pairs(extra) do
    if v ~= false then list[#list + 1] = k .. "=" .. tostring(v) end
    seen[k] = true
  end
  local env = C.environ
  local i = 0
  while env[i] ~= nil do
    local s = ffi.string(env[i])
    local k = s:match("^([^=]*)=")
    if not (k and seen[k]) then list[#list + 1] = s end
    i = i + 1
  end
  local arr = ffi.new("char *[?]", #list + 1)
  local keep = {}
  for j, s in ipairs(list) do
    local c = ffi.new("char[?]", #s + 1, s)
    keep[j] = c
    arr[j - 1] = c
  end
  return arr, keep
end

local pdeathsig -- setpriv(1) makes a child die with the spec runner, even on SIGKILL
local function setpriv_path()
  if pdeathsig == nil then
    local f = io.open("/usr/bin/setpriv", "rb")
    pdeathsig = f and "/usr/bin/setpriv" or false
    if f then f:close() end
  end
  return pdeathsig
end

-- spawn(argv, opts) -> process. argv[1] is looked up in PATH. opts: name,
-- stdin (a file, default /dev/null), stdout / stderr (files, default
-- <workdir>/<name>-<n>.out / .err), env (extra variables; false unsets).
-- The child gets its own process group, default signal handling and an
-- empty signal mask, and is registered for cleanup().
function helpers.spawn(argv, opts)
  opts = opts or {}
  registry.seq = registry.seq + 1
  local name = opts.name or (argv[1]:match("[^/]*$"))
  local base = string.format("%s/%s-%d", workdir(), name:gsub("[^%w._-]", "_"), registry.seq)
  local stdout_path = opts.stdout or (base .. ".out")
  local stderr_path = opts.stderr or (base .. ".err")

  local args = {}
  local sp = opts.pdeathsig ~= false and setpriv_path()
  if sp then
    args[1], args[2], args[3] = sp, "--pdeathsig", "KILL"
  end
  for _, a in ipairs(argv) do args[#args + 1] = tostring(a) end
  local cargv = ffi.new("char *[?]", #args + 1)
  local keep = {}
  for i, a in ipairs(args) do
    keep[i] = ffi.new("char[?]", #a + 1, a)
    cargv[i - 1] = keep[i]
  end
  local envp, envkeep = build_env(opts.env)

  local fa = ffi.new("uint64_t[64]") -- posix_spawn_file_actions_t is 80 bytes on glibc
  local attr = ffi.new("uint64_t[64]") -- posix_spawnattr_t is 336 bytes
  local sigs = ffi.new("uint64_t[32]") -- sigset_t is 128 bytes
  local pid = ffi.new("int[1]")
  assert(C.posix_spawn_file_actions_init(fa) == 0)
  assert(C.posix_spawnattr_init(attr) == 0)
  C.posix_spawn_file_actions_addopen(fa, 0, opts.stdin or "/dev/null", O_RDONLY, 0)
  C.posix_spawn_file_actions_addopen(fa, 1, stdout_path, O_WRONLY + O_CREAT + O_TRUNC, 420)
  C.posix_spawn_file_actions_addopen(fa, 2, stderr_path, O_WRONLY + O_CREAT + O_TRUNC, 420)
  C.posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP + POSIX_SPAWN_SETSIGDEF +
                                   POSIX_SPAWN_SETSIGMASK)
  C.posix_spawnattr_setpgroup(attr, 0)
  C.sigemptyset(sigs)
  C.posix_spawnattr_setsigmask(attr, sigs)
  for _, s in ipairs { SIG.HUP, SIG.INT, SIG.TERM, SIG.PIPE, SIG.CHLD } do C.sigaddset(sigs, s) end
  C.posix_spawnattr_setsigdefault(attr, sigs)
  local rc = C.posix_spawnp(pid, cargv[0], fa, attr, cargv, envp)
  C.posix_spawn_file_actions_destroy(fa)
  C.posix_spawnattr_destroy(attr)
  local _ = envkeep
  if rc ~= 0 then
    error(string.format("posix_spawnp %s: %s", args[1], ffi.string(C.strerror(rc))), 2)
  end
  local proc = setmetatable({ pid = pid[0], name = name, argv = argv, started_at = now(),
                              stdout_path = stdout_path, stderr_path = stderr_path }, Proc)
  registry.procs[#registry.procs + 1] = proc
  return proc
end

-- run(argv, opts) -> status, stdout, stderr: runs a command to its end, for
-- at most opts.timeout s (default 60; then it is killed and run() fails).
function helpers.run(argv, opts)
  opts = opts or {}
  local proc = helpers.spawn(argv, opts)
  local st = proc:wait(opts.timeout or 60)
  if not st then
    proc:kill()
    error(string.format("%s timed out after %gs; stderr:\n%s", table.concat(argv, " "),
                        opts.timeout or 60, tail(proc:log())), 2)
  end
  return st, proc:stdout(), proc:log()
end

-- Kills (SIGKILL) and reaps every process the current spec started, then
-- removes its temporary directories. Call it from after_each / teardown.
-- What AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer print (make test
-- SAN=1): found in any process's stderr, it fails the spec, even when the process ended as
-- the spec wanted (killed, or a status it did not look at).
local SANITIZER_REPORTS = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", ": runtime error: " }

local function sanitizer_reports(procs)
  local found = {}
  for _, p in ipairs(procs) do
    local log = p:log()
    for _, pat in ipairs(SANITIZER_REPORTS) do
      local at = log:find(pat, 1, true)
      if at then
        local from = math.max(1, (log:sub(1, at):match(".*()\n") or 1))
        found[#found + 1] = string.format("%s (pid %d): %s", p.name or "?", p.pid,
                                          log:sub(from, from + 1500))
        break
      end
    end
  end
  return found
end

function helpers.cleanup()
  local procs = registry.procs
  registry.procs = {}
  for _, p in ipairs(procs) do
    if not p.status then
      C.kill(p.pid, SIG.KILL)
    end
  end
  for _, p in ipairs(procs) do
    if not p.status then
      local limit = now() + 10
      while not p:poll() and now() < limit do C.poll(nil, 0, 10) end
    end
  end
  local reports = sanitizer_reports(procs)
  local dirs = registry.dirs
  registry.dirs, registry.workdir = {}, nil
  if os.getenv("BECK_SPEC_KEEP") then
    for _, d in ipairs(dirs) do io.stderr:write("kept ", d, "\n") end
  else
    for _, d in ipairs(dirs) do rmtree(d) end
  end
  if #reports > 0 then
    error("a sanitizer reported:\n" .. table.concat(reports, "\n"), 0)
  end
end

-- Last resort when a spec file forgets cleanup() or the runner errors out:
-- closing the VM kills what is left.
helpers._sentinel = ffi.gc(ffi.new("int[1]"), function()
  for _, p in ipairs(registry.procs) do
    if not p.status then C.kill(p.pid, SIG.KILL); C.waitpid(p.pid, nil, 0) end
  end
end)

function helpers.beck_bin()
  return os.getenv("BECK_BIN") or "bin/beck"
end

-- The binary with the FFI entry points only beck's own specs call (runtime/base/ffi_spec.h),
-- for a `beck test` child that calls them; bin/beck ships without them.
function helpers.beck_spec_bin()
  return os.getenv("BECK_SPEC_BIN") or "bin/beck-spec"
end

-- -- The dev broker's control channel ---------------------------------------

-- Sends one command line to 127.0.0.1:port and returns the reply line
-- ("OK ..." or "ERR ..."); raises on I/O errors or after `timeout` s (15).
function helpers.control(port, line, timeout)
  local fd = C.socket(AF_INET, SOCK_STREAM, 0)
  if fd < 0 then error("socket: " .. errno_text(), 2) end
  local ok, res = pcall(function()
    local sa = ffi.new("bk_spec_sockaddr_in_t")
    sa.family = AF_INET
    sa.port = bit.bor(bit.rshift(port, 8), bit.lshift(bit.band(port, 0xff), 8))
    sa.addr = 0x0100007f -- 127.0.0.1 in network order, on a little-endian host
    assert(ffi.abi("le"), "helpers.control assumes a little-endian host")
    if C.connect(fd, sa, ffi.sizeof(sa)) ~= 0 then
      error(string.format("connect 127.0.0.1:%d: %s", port, errno_text()))
    end
    local msg = line .. "\n"
    if C.send(fd, msg, #msg, MSG_NOSIGNAL) ~= #msg then
      error("send: " .. errno_text())
    end
    local limit, got = now() + (timeout or 15), {}
    local buf = ffi.new("char[4096]")
    local pfd = ffi.new("bk_spec_pollfd_t")
    pfd.fd, pfd.events = fd, POLLIN
    while true do
      local s = table.concat(got)
      local nl = s:find("\n", 1, true)
      if nl then return (s:sub(1, nl - 1):gsub("\r$", "")) end
      local left = limit - now()
      if left <= 0 then error(string.format("no reply to %q in %gs", line, timeout or 15)) end
      if C.poll(pfd, 1, math.floor(left * 1000) + 1) > 0 then
        local n = tonumber(C.recv(fd, buf, 4096, 0))
        if n <= 0 then error(string.format("connection closed before the reply to %q", line)) end
        got[#got + 1] = ffi.string(buf, n)
      end
    end
  end)
  C.close(fd)
  if not ok then error(res, 2) end
  return res
end

local Broker = setmetatable({}, { __index = Proc })
Broker.__index = Broker

-- The raw reply to a command line.
function Broker:control(line)
  return helpers.control(self.control_port, line)
end

local function ok_or_err(reply)
  if reply:match("^OK") then return true end
  return nil, reply
end

-- true, or nil and the broker's "ERR ..." reply.
function Broker:create_topic(name, partitions)
  return ok_or_err(self:control(string.format("CREATE %s %d", name, partitions)))
end

function Broker:broker_down(id) return ok_or_err(self:control("DOWN " .. id)) end
function Broker:broker_up(id) return ok_or_err(self:control("UP " .. id)) end

-- -- Backends: the dev broker or a real Apache Kafka --------------------------

-- "dev" (librdkafka's mock cluster in `beck broker`) or "kafka" (a real Apache
-- Kafka started by scripts/kafka), from BECK_SPEC_BACKEND.
function helpers.backend()
  local b = os.getenv("BECK_SPEC_BACKEND") or "dev"
  assert(b == "dev" or b == "kafka", "BECK_SPEC_BACKEND is dev or kafka, not " .. b)
  return b
end

function helpers.real_kafka() return helpers.backend() == "kafka" end

local function racks_arg(racks)
  return type(racks) == "table" and table.concat(racks, ",") or racks
end

local Kafka = {}
Kafka.__index = Kafka

-- The broker processes are spawned here (not by `scripts/kafka start`, which
-- puts them in the background) so that cleanup() kills them by PID and they
-- die with the spec runner.
local function kafka_spawn(cluster, id)
  -- C1 only: a broker of a spec starts in 4.4 s instead of 7-8 s (3 brokers on 2 cores),
  -- and the specs' loads are far below what C2 would make faster
  local p = helpers.spawn({ "scripts/kafka", "exec", id, "--dir", cluster.dir },
                          { name = "kafka-" .. id,
                            env = { BROKER_OPTS = "-XX:TieredStopAtLevel=1" } })
  cluster.procs[id] = p
  return p
end

-- Waits until the metadata lists `n` brokers.
local function kafka_wait(cluster, n, timeout)
  local st, _, err = helpers.run({ "scripts/kafka", "wait", n, "--dir", cluster.dir },
                                 { name = "kafka-wait", timeout = timeout or 90,
                                   env = { BECK_KAFKA_START_TIMEOUT = timeout or 60 } })
  if st ~= 0 then
    local logs = {}
    for id, p in pairs(cluster.procs) do
      logs[#logs + 1] = string.format("broker %d (%s):\n%s", id,
                                      p:alive() and "running" or ("exited " .. tostring(p.status)),
                                      tail(read_file(cluster.dir .. "/broker-" .. id ..
                                                     "/server.log") or p:log(), 1500))
    end
    error("Kafka did not come up: " .. tail(err, 800) .. "\n" .. table.concat(logs, "\n"), 0)
  end
end

-- kafka { brokers = N, racks = "a,b,c", topics = { "name:parts", ... },
--         set = { "key=value", ... } } -> a real Apache Kafka cluster on loopback,
-- up and answering metadata. cluster.bootstrap, :create_topic, :broker_down(id),
-- :broker_up(id), :all_down(), :all_up(), :stop(); its processes end in cleanup().
function helpers.kafka(opts)
  opts = opts or {}
  local n = opts.brokers or 1
  local dir = helpers.tmpdir()
  local argv = { "scripts/kafka", "format", "--dir", dir, "--brokers", n }
  if opts.racks then
    argv[#argv + 1] = "--racks"
    argv[#argv + 1] = racks_arg(opts.racks)
  end
  for _, kv in ipairs(opts.set or {}) do
    argv[#argv + 1] = "--set"
    argv[#argv + 1] = kv
  end
  local st, out, err = helpers.run(argv, { name = "kafka-format", timeout = 60 })
  if st ~= 0 then error("scripts/kafka format failed: " .. tail(err), 2) end
  local cluster = setmetatable({ dir = dir, brokers = n, procs = {}, kind = "kafka",
                                 bootstrap = out:match("^([^\n]+)") }, Kafka)
  for id = 1, n do kafka_spawn(cluster, id) end
  kafka_wait(cluster, n, opts.timeout)
  for _, t in ipairs(opts.topics or {}) do
    local name, parts = t:match("^(.+):(%d+)$")
    assert(cluster:create_topic(name, tonumber(parts)))
  end
  helpers.trace("kafka up: %s", cluster.bootstrap)
  return cluster
end

-- create_topic(name, partitions [, configs = { ["cleanup.policy"] = "compact" }
-- [, replication_factor]]) -> true, or nil and the error.
function Kafka:create_topic(name, partitions, configs, rf)
  local args = { "create", self.bootstrap, name, partitions, rf or math.min(self.brokers, 3) }
  for k, v in pairs(configs or {}) do args[#args + 1] = k .. "=" .. tostring(v) end
  local out, err = helpers.kafka_client(args, {})
  if not out then return nil, err end
  return true
end

-- A crash of broker `id` (SIGKILL), and its restart with the same data and ports.
function Kafka:broker_down(id)
  local p = self.procs[id]
  if not p then return nil, "no broker " .. tostring(id) end
  p:kill()
  return true
end

function Kafka:broker_up(id)
  if self.procs[id] and self.procs[id]:alive() then return nil, "broker " .. id .. " runs" end
  kafka_spawn(self, id)
  local up = 0
  for _, p in pairs(self.procs) do if p:alive() then up = up + 1 end end
  kafka_wait(self, up)
  return true
end

-- Every broker crashes (SIGKILL) at once, and comes back with the same data and ports:
-- a cluster-wide outage (spec 30).
function Kafka:all_down()
  for _, p in pairs(self.procs) do p:kill() end
  return true
end

function Kafka:all_up()
  for id = 1, self.brokers do
    if not (self.procs[id] and self.procs[id]:alive()) then kafka_spawn(self, id) end
  end
  kafka_wait(self, self.brokers)
  return true
end

function Kafka:control()
  error("the dev broker's control channel: this spec needs BECK_SPEC_BACKEND=dev", 2)
end

function Kafka:alive()
  for _, p in pairs(self.procs) do if p:alive() then return true end end
  return false
end

function Kafka:kill()
  for _, p in pairs(self.procs) do p:kill() end
  return 137
end

function Kafka:stop()
  local status = 0
  for id = self.brokers, 1, -1 do
    local p = self.procs[id]
    if p and p:alive() then status = p:stop(SIG.TERM, 30) end
  end
  return status
end

function Kafka:log()
  return read_file(self.dir .. "/broker-1/server.log") or ""
end

-- start_broker { brokers = N, racks = "a,b" | {"a","b"}, topics = {"name:parts", ...} }
-- Starts `beck broker` and waits for its bootstrap address and control port;
-- with BECK_SPEC_BACKEND=kafka, a real Kafka cluster of that shape instead.
function helpers.start_broker(opts)
  opts = opts or {}
  if helpers.real_kafka() then return helpers.kafka(opts) end
  local argv = { helpers.beck_bin(), "broker" }
  if opts.brokers then
    argv[#argv + 1] = "--brokers"
    argv[#argv + 1] = opts.brokers
  end
  if opts.racks then
    argv[#argv + 1] = "--racks"
    argv[#argv + 1] = racks_arg(opts.racks)
  end
  for _, t in ipairs(opts.topics or {}) do
    argv[#argv + 1] = "--topic"
    argv[#argv + 1] = t
  end
  local proc = helpers.spawn(argv, { name = "broker", env = opts.env })
  local broker = setmetatable(proc, Broker)
  helpers.eventually(function()
    local out = proc:stdout()
    local bs, port = out:match("^([^\n]+)\ncontrol 127%.0%.0%.1:(%d+)\n")
    if bs then
      broker.bootstrap, broker.control_port = bs, tonumber(port)
      return true
    end
    if not proc:alive() then
      error(string.format("beck broker exited with %d before printing its address; stderr:\n%s",
                          proc.status, tail(proc:log())), 0)
    end
    return nil, "no address on stdout yet: " .. out
  end, opts.timeout or 15, 0.05)
  return broker
end

-- -- Nodes -------------------------------------------------------------------

local Node = setmetatable({}, { __index = Proc })
Node.__index = Node

-- The embedded dev broker's address ("dev broker: HOST:PORT", first line of
-- stdout) of a node started without -b.
function Node:dev_broker(timeout)
  if self.bootstrap then return self.bootstrap end
  self.bootstrap = helpers.eventually(function()
    local bs = self:stdout():match("^dev broker: ([^\n]+)\n")
    if bs then return bs end
    if not self:alive() then
      error(string.format("node exited with %d before printing its dev broker; stderr:\n%s",
                          self.status, tail(self:log())), 0)
    end
  end, timeout or 15, 0.05)
  return self.bootstrap
end

-- Waits until every stream thread runs (its "live" event, docs/events.md).
function Node:wait_running(timeout)
  return self:wait_event("live", nil, timeout)
end

-- -- A node's events (docs/events.md) ------------------------------------------------
-- start_node gives every node an events file (BECK_EVENTS); these read it. The contract of
-- the specs: what a node did is read from its events, not from its log's wording (log text
-- is asserted only where the message itself is the feature: an error a user must read).

-- Does event e have every field of `match` (a table of values, or a function of e)?
local function event_matches(e, match)
  if match == nil then return true end
  if type(match) == "function" then return match(e) end
  for k, v in pairs(match) do
    if e[k] ~= v then return false end
  end
  return true
end

-- Every event of the node so far, in order; or those of one kind (that match `match`).
function Node:events(kind, match)
  local out = {}
  local text = self.events_path and read_file(self.events_path) or ""
  for line in text:gmatch("[^\n]+") do
    local e = cjson.decode(line)
    if e and (not kind or e.kind == kind) and event_matches(e, match) then out[#out + 1] = e end
  end
  return out
end

-- The node's last event of `kind` that matches, or nil.
function Node:last_event(kind, match)
  local list = self:events(kind)
  for i = #list, 1, -1 do
    if event_matches(list[i], match) then return list[i] end
  end
end

-- Waits until the node has an event of `kind` matching `match` (after the `after`th event of
-- the node when given); returns the first such event.
function Node:wait_event(kind, match, timeout, after)
  return helpers.eventually(function()
    for i, e in ipairs(self:events()) do
      if i > (after or 0) and e.kind == kind and event_matches(e, match) then return e end
    end
    if not self:alive() then
      error(string.format("%s exited with %s before its %s event; stderr:\n%s", self.name,
                          tostring(self.status), kind, tail(self:log())), 0)
    end
    return nil, string.format("%s has no %s event like that yet; its last events:\n%s",
                              self.name, kind, self:events_tail())
  end, timeout or 15, 0.05)
end

-- The URL the node serves queries on (its "serving" event), once it does.
function Node:query_url(timeout)
  return self:wait_event("serving", nil, timeout or 20).url
end

-- The node's last few events as text, for a failure message.
function Node:events_tail(n)
  local list, out = self:events(), {}
  for i = math.max(1, #list - (n or 8) + 1), #list do out[#out + 1] = cjson.encode(list[i]) end
  return table.concat(out, "\n")
end

-- start_node(topology, args, opts) -> node: `beck run topology args...`.
-- Adds --state-dir <tmpdir> unless args name one. opts: env, name.
function helpers.start_node(topology, args, opts)
  opts = opts or {}
  local argv = { helpers.beck_bin(), "run", topology }
  local has_state = false
  for _, a in ipairs(args or {}) do
    argv[#argv + 1] = a
    if tostring(a):match("^%-%-state[-_]dir") then has_state = true end
  end
  if not has_state then
    argv[#argv + 1] = "--state-dir"
    argv[#argv + 1] = helpers.tmpdir()
  end
  -- its events (docs/events.md) in a file of its own, beside its log
  registry.seq = registry.seq + 1
  local events = string.format("%s/%s-%d.events", workdir(),
                               (opts.name or "node"):gsub("[^%w._-]", "_"), registry.seq)
  -- a move of a task's life outside engine/tasklife.c's table aborts the node: every spec
  -- checks the table too
  local env = { BECK_EVENTS = events, BECK_LIFE_STRICT = "1" }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local proc = helpers.spawn(argv, { name = opts.name or "node", env = env })
  proc.events_path = env.BECK_EVENTS or nil
  return setmetatable(proc, Node)
end

-- -- Outside Kafka client -----------------------------------------------------

local PY = "/usr/bin/python3" -- the system Python, which has python3-kafka

local function client_path()
  local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "spec"
  return dir .. "/fixtures/kafka_client.py"
end

local function client(args, opts)
  opts = opts or {}
  local argv = { PY, client_path() }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local st, out, err = helpers.run(argv, { name = "kafka_client-" .. args[1], stdin = opts.stdin,
                                           timeout = (opts.timeout or 60) + 15 })
  if st ~= 0 then
    return nil, string.format("kafka_client %s %s exited with %d: %s", args[1], args[3], st,
                              tail(err, 2000))
  end
  return out
end

local function encode_field(rec, name, s)
  if s == nil then return end
  s = tostring(s)
  if s:find("[\128-\255]") then
    rec[name .. "_hex"] = (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
  else
    rec[name] = s
  end
end

local function from_hex(h)
  return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

-- Only a string is a value: cjson.null stands for JSON null.
local function field(rec, name)
  local v = rec[name .. "_hex"]
  if type(v) == "string" then return from_hex(v) end
  v = rec[name]
  if type(v) == "string" then return v end
  return nil
end

-- produce(bootstrap, topic, records, opts): writes records through the
-- outside client and waits for their acknowledgement. A record is
-- { key, value } or { key =, value =, headers = { name = value } or
-- { { name, value }, ... }, partition =, timestamp = ms }. Returns the number written.
function helpers.produce(bootstrap, topic, records, opts)
  opts = opts or {}
  local lines = {}
  for i, r in ipairs(records) do
    local rec = {}
    local key, value = r.key, r.value
    if key == nil and value == nil then key, value = r[1], r[2] end
    encode_field(rec, "key", key)
    encode_field(rec, "value", value)
    rec.partition = r.partition
    rec.timestamp = r.timestamp
    if r.headers then
      local hs = {}
      if r.headers[1] then
        for _, h in ipairs(r.headers) do hs[#hs + 1] = { h[1], h[2] } end
      else
        local names = {}
        for k in pairs(r.headers) do names[#names + 1] = k end
        table.sort(names)
        for _, k in ipairs(names) do hs[#hs + 1] = { k, r.headers[k] } end
      end
      rec.headers = hs
    end
    lines[i] = cjson.encode(rec)
  end
  local path = string.format("%s/produce-%d.jsonl", workdir(), registry.seq + 1)
  write_file(path, table.concat(lines, "\n") .. "\n")
  local out, err = client({ "produce", bootstrap, topic, "--timeout", opts.timeout or 60,
                            opts.transactional and "--transactional" or nil },
                          { stdin = path, timeout = opts.timeout })
  if not out then error(err, 2) end
  local res = cjson.decode(out)
  if type(res) ~= "table" or res.produced ~= #records then
    error("produce: unexpected reply " .. out, 2)
  end
  return res.produced
end

-- consume(bootstrap, topic, opts) -> list of { key, value, partition,
-- offset, timestamp, headers = { name = value } }, everything from the start of each
-- partition to its high watermark, ordered by partition then offset. A
-- missing key or value is nil. opts.timeout (s, default 30). opts.committed: as a
-- read_committed reader (librdkafka's Python binding: python3-kafka 2.0.2 cannot), up to
-- each partition's last stable offset.
function helpers.consume(bootstrap, topic, opts)
  opts = opts or {}
  local out, err = client({ "consume", bootstrap, topic, "--timeout", opts.timeout or 30,
                            opts.committed and "--committed" or nil }, opts)
  if not out then error(err, 2) end
  local list = {}
  for line in out:gmatch("[^\n]+") do
    local rec = cjson.decode(line)
    if type(rec) ~= "table" then error("consume: bad line " .. line, 2) end
    local headers, header_list = {}, {}
    for _, h in ipairs(type(rec.headers) == "table" and rec.headers or {}) do
      local v = type(h[2]) == "string" and h[2] or nil
      headers[h[1]] = v
      header_list[#header_list + 1] = { h[1], v }
    end
    list[#list + 1] = { key = field(rec, "key"), value = field(rec, "value"),
                        partition = rec.partition, offset = rec.offset, headers = headers,
                        header_list = header_list, timestamp = rec.timestamp }
  end
  table.sort(list, function(a, b)
    if a.partition ~= b.partition then return a.partition < b.partition end
    return a.offset < b.offset
  end)
  return list
end

-- count(bootstrap, topic) -> sum of the partitions' high watermarks, and a
-- table partition -> high watermark.
function helpers.count(bootstrap, topic, opts)
  opts = opts or {}
  local out, err = client({ "count", bootstrap, topic, "--timeout", opts.timeout or 10 }, opts)
  if not out then error(err, 2) end
  local res = cjson.decode(out)
  local ends = {}
  for p, e in pairs(res.ends) do ends[tonumber(p)] = e end
  return res.count, ends
end

-- list_topics(bootstrap) -> the names of the topics the brokers have, sorted.
function helpers.list_topics(bootstrap, opts)
  opts = opts or {}
  local out, err = client({ "topics", bootstrap, "-", "--timeout", opts.timeout or 10 }, opts)
  if not out then error(err, 2) end
  return cjson.decode(out)
end

-- metadata(bootstrap, topic) -> { partitions = P, leaders = { [partition] =
-- broker id }, brokers = { { id =, host =, port =, rack = }, ... } }, from
-- the cluster metadata only (no request to a partition's leader).
function helpers.metadata(bootstrap, topic, opts)
  opts = opts or {}
  local out, err = client({ "metadata", bootstrap, topic, "--timeout", opts.timeout or 10 }, opts)
  if not out then error(err, 2) end
  local res = cjson.decode(out)
  local leaders = {}
  for p, id in pairs(res.leaders) do leaders[tonumber(p)] = id end
  for _, b in ipairs(res.brokers) do
    if type(b.rack) ~= "string" then b.rack = nil end
  end
  return { partitions = res.partitions, leaders = leaders, brokers = res.brokers }
end

-- ls(dir) -> the names in a directory, sorted ({} when it does not exist).
function helpers.ls(dir)
  local st, out = helpers.run({ "ls", "-1A", dir }, { timeout = 10 })
  local names = {}
  if st == 0 then
    for name in out:gmatch("[^\n]+") do names[#names + 1] = name end
  end
  return names
end

-- committed(bootstrap, topic, group) -> table partition -> committed offset
-- (absent when the group has none), read with OffsetFetch by the outside client.
function helpers.committed(bootstrap, topic, group, opts)
  opts = opts or {}
  local out, err = client({ "committed", bootstrap, topic, group, "--timeout",
                            opts.timeout or 10 }, opts)
  if not out then error(err, 2) end
  local res = cjson.decode(out)
  local offsets = {}
  for p, o in pairs(res) do
    if type(o) == "number" then offsets[tonumber(p)] = o end
  end
  return offsets
end

-- kafka_client(args, opts) -> stdout, or nil and the error: any command of
-- spec/fixtures/kafka_client.py.
helpers.kafka_client = client

-- offsets(bootstrap, topic) -> table partition -> { start, end } (log start
-- offset and high watermark).
function helpers.offsets(bootstrap, topic, opts)
  opts = opts or {}
  local out, err = client({ "offsets", bootstrap, topic, "--timeout", opts.timeout or 10 }, opts)
  if not out then error(err, 2) end
  local res, t = cjson.decode(out), {}
  for p, se in pairs(res) do t[tonumber(p)] = { se[1], se[2] } end
  return t
end

-- records(bootstrap, topic) -> how many records the topic holds (high watermark minus log
-- start offset, summed over its partitions).
function helpers.records(bootstrap, topic)
  local n = 0
  for _, se in pairs(helpers.offsets(bootstrap, topic)) do n = n + se[2] - se[1] end
  return n
end

-- wait_empty(bootstrap, topics, timeout) waits until each topic holds no record (its records
-- deleted: DeleteRecords to its end).
function helpers.wait_empty(bootstrap, topics, timeout)
  for _, topic in ipairs(topics) do
    helpers.eventually(function()
      local n = helpers.records(bootstrap, topic)
      return n == 0, topic .. " keeps " .. n .. " record(s)"
    end, timeout or 30, 0.5)
  end
end

-- configs(bootstrap, topic) -> table name -> value of a topic's configs (real Kafka).
function helpers.configs(bootstrap, topic)
  local out, err = client({ "configs", bootstrap, topic }, {})
  if not out then error(err, 2) end
  return cjson.decode(out)
end

-- -- Small things many specs need ---------------------------------------------

-- line_of(path, text) -> the number of the first line of `path` holding
-- `text` (plain), so that specs find a fixture's line instead of hard-coding it.
function helpers.line_of(path, text)
  local n = 0
  for line in io.lines(path) do
    n = n + 1
    if line:find(text, 1, true) then return n end
  end
  error("no " .. text .. " in " .. path, 2)
end

-- The key of the commit markers in changelogs (runtime/engine/store.h BK_KEYS_MARKER);
-- markers written before had none.
helpers.MARKER_KEY = "\255beck-marker"

-- is_marker(record) -> whether a changelog record read by consume() is a marker.
function helpers.is_marker(r)
  return r.key == nil or r.key == helpers.MARKER_KEY
end

-- kvs(records) -> { { key, value }, ... } of output records, in order.
function helpers.kvs(records)
  local list = {}
  for i, r in ipairs(records) do list[i] = { r.key, r.value } end
  return list
end

-- { key, timestamp, value } of each record, as read from an output.
function helpers.ktv(records)
  local list = {}
  for i, r in ipairs(records) do list[i] = { r.key, r.timestamp, r.value } end
  return list
end

-- http_get(url, path) -> status, decoded JSON body (nil for other text), the raw body: a GET
-- of a node's query server through spec/fixtures/query_client.py.
function helpers.http_get(url, path)
  local st, out, err = helpers.run({ "/usr/bin/python3", "spec/fixtures/query_client.py", "status",
                                     url, path }, { name = "query_client" })
  assert(st == 0, err)
  local r = assert(cjson.decode(out))
  return r.status, cjson.decode(r.body), r.body
end

-- Rows { key, value } of an iterator of (key, value), as a store's all() or range() gives.
function helpers.rows(iter)
  local list = {}
  for k, v in iter do list[#list + 1] = { k, v } end
  return list
end

-- Closes a test driver (beck.testing) if there is one; nil, to assign back:
--   after_each(function() driver = close_driver(driver) end)
function helpers.close_driver(driver)
  if driver then driver:close() end
  return nil
end

-- -- Disk faults ---------------------------------------------------------------

-- The environment that makes a node's disk below dir read-only (fault "erofs") or full
-- after `bytes` written (fault "enospc"): spec/fixtures/faultfs.c, built here once per run
-- and preloaded into the node (into build/, which outlives a spec's temporary directories: a
-- missing preload is only a warning to the loader, and the fault would silently not be
-- there). No mount, no root.
local faultfs_so
function helpers.faultfs(dir, fault, bytes)
  if not faultfs_so then
    local so = io.popen("pwd"):read("*l") .. "/build/spec/faultfs.so"
    local st, _, err = helpers.run({ "sh", "-c", "mkdir -p build/spec && cc -shared -fPIC -O1 " ..
                                     "-Wall -Wextra -o " .. so .. " spec/fixtures/faultfs.c -ldl" },
                                   { name = "cc" })
    assert(st == 0, "cannot build spec/fixtures/faultfs.c: " .. tostring(err))
    faultfs_so = so
  end
  -- (under make test SAN=1, ASan wants to be the first library; this one only wraps libc)
  return { LD_PRELOAD = faultfs_so, BECK_FAULT_DIR = dir, BECK_FAULT = fault,
           BECK_FAULT_BYTES = bytes and tostring(bytes) or false,
           ASAN_OPTIONS = "verify_asan_link_order=0:" .. (os.getenv("ASAN_OPTIONS") or "") }
end

return helpers
