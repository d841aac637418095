-- beck.query: the app's state as the query server of this node serves it (docs/queries.md),
-- for hooks and processors: the same reads as GET /v1/stores/..., routed to the node that
-- holds a key, with the same answers. It needs the node to serve queries (--endpoint or
-- --http-listen); each call is an HTTP round trip to this node (and on to the owner), so it
-- belongs in hooks and rare paths, not in a processor's every record.
--
--   local query = require "beck.query"
--   local v, info = query.get("counts", "apple")              -- "42", { task =, node =, ... }
--   local v = query.get("counts", "apple", { replica = "any", max_lag = 100 })
--   local page = query.range("counts", { from = "a", to = "b", limit = 100 })
--   for _, item in ipairs(page.items) do ... end              -- page.cursor: the next page's
--   local page = query.prefix("counts", "app")
--   local w = query.windows("views-per-minute", "alice", { from = t0, to = t1 })
--
-- get returns nil, info when the key is not there; every call raises when there is no
-- answer (no server, a task that cannot be read now: info.status 503), saying why.
require "beck.internal.runtime" -- the FFI declarations
local ffi = require "ffi"
local cjson = require("cjson").new()

local C = ffi.C
local format = string.format

local M = {}

local function escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return format("%%%02X", c:byte()) end))
end

local function args(t)
  local out, names = {}, {}
  for k in pairs(t) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    out[#out + 1] = escape(k) .. "=" .. escape(t[k])
  end
  return #out > 0 and "?" .. table.concat(out, "&") or ""
end

local status = ffi.new("int32_t[1]")
local len = ffi.new("size_t[1]")

-- GET path on this node: status, decoded answer (or nil and the body).
local function get(path)
  local body = C.bk_ffi_query_get(path, status, len)
  if body == nil then
    error("beck.query: this node serves no queries (run it with --endpoint or --http-listen)",
          3)
  end
  local s = ffi.string(body, len[0])
  C.bk_ffi_query_free(body)
  if status[0] == 0 then error("beck.query: no answer: " .. s, 3) end
  local ok, ans = pcall(cjson.decode, s)
  return status[0], ok and ans or nil, s
end

local function replica(opts, t)
  if opts and opts.replica then t.replica = opts.replica end
  if opts and opts.max_lag then t.max_lag = opts.max_lag end
  return t
end

local function fail(st, ans, body)
  error(format("beck.query: %d: %s", st, ans and ans.error or body), 3)
end

-- get(store, key [, opts]) -> value, info | nil, info
function M.get(store, key, opts)
  local st, ans, body = get("/v1/stores/" .. escape(store) .. "/keys/" .. escape(key) ..
                            args(replica(opts, {})))
  if st == 200 then return ans.value, ans end
  if st == 404 and ans and ans.error == "no such key" then return nil, ans end
  fail(st, ans, body)
end

local function page(path, q, opts)
  if opts then
    q.limit, q.cursor = opts.limit, opts.cursor
  end
  local st, ans, body = get(path .. args(replica(opts, q)))
  if st == 200 then return ans end
  fail(st, ans, body)
end

-- range(store [, opts]) -> { items = { { key =, value =, task = }, ... }, cursor = }
-- opts: from, to (inclusive), limit, cursor, replica, max_lag
function M.range(store, opts)
  opts = opts or {}
  return page("/v1/stores/" .. escape(store) .. "/range", { from = opts.from, to = opts.to },
              opts)
end

-- prefix(store, prefix [, opts]) -> the same, for the keys starting with prefix
function M.prefix(store, prefix, opts)
  return page("/v1/stores/" .. escape(store) .. "/prefix/" .. escape(prefix), {}, opts)
end

-- windows(store, key [, opts]) -> { windows = { { time =, time2 =, value = }, ... },
-- more = } of a window store; opts: from, to (ms), limit, replica, max_lag
function M.windows(store, key, opts)
  opts = opts or {}
  local q = replica(opts, { from = opts.from, to = opts.to, limit = opts.limit })
  local st, ans, body = get("/v1/stores/" .. escape(store) .. "/keys/" .. escape(key) ..
                            "/windows" .. args(q))
  if st == 200 then return ans end
  fail(st, ans, body)
end

return M
