-- beck.internal.store: the Lua face of a task's key-value store, with the
-- stream thread's write-back record cache in front of it.
--
-- The cache (cache_max_bytes per thread, as Kafka Streams'
-- cache.max.bytes.buffering) keeps the latest value of recently used keys in
-- Lua tables: get and put of a hot key cost no FFI call, and a key updated
-- many times between two commits reaches RocksDB and its changelog once, at
-- the flush the commit starts. With the cache at 0 every put and delete goes
-- straight through (an FFI call to runtime/engine/store.c).
local ffi = require "ffi"

local C = ffi.C
local ffi_string = ffi.string
local type, error, pairs, setmetatable = type, error, pairs, setmetatable
local string_format = string.format

local M = {}

local ENTRY_OVERHEAD = 64 -- rough bytes of a cache entry beyond key and value
local TOMBSTONE = {}      -- a deleted key in the cache

local vptr, vlen = ffi.new("const char *[1]"), ffi.new("size_t[1]")
local kptr, klen = ffi.new("const char *[1]"), ffi.new("size_t[1]")

local function store_error(self, level)
  error(ffi_string(C.bk_ffi_store_error(self.ptr)), level + 1)
end

local function check_key(self, key, op)
  if type(key) ~= "string" then
    error(string_format("store '%s': %s: the key must be a string, got %s", self.name, op,
                        type(key)), 3)
  end
end

-- -- The thread's cache ------------------------------------------------------

-- One per stream thread: `max` bytes for all its stores.
function M.new_cache(max)
  -- hits: gets the cache answered; misses: gets that went to the store (C reads both at
  -- each commit for /metrics, through the thread's flush)
  local cache = { max = max, bytes = 0, dirty_stores = {}, stores = {}, hits = 0, misses = 0 }
  -- Writes every dirty entry through; at commit, on overflow, before a scan.
  function cache.flush()
    local list = cache.dirty_stores
    cache.dirty_stores = {}
    for i = 1, #list do list[i]:_flush_dirty() end
    -- Still near the budget with only clean entries left: drop them (they
    -- are in the stores); a hot working set that fits stays cached.
    if cache.bytes > max * 0.9 then
      for _, st in pairs(cache.stores) do
        st.entries = {}
        if st.wtime then st.wtime = {} end
      end
      cache.bytes = 0
    end
  end
  -- Forgets a store whose task left the thread (its dirty entries were flushed by the
  -- commit before): its entries no longer count against the budget.
  function cache.drop(st)
    for i = #cache.stores, 1, -1 do
      if cache.stores[i] == st then table.remove(cache.stores, i) end
    end
    for i = #cache.dirty_stores, 1, -1 do
      if cache.dirty_stores[i] == st then table.remove(cache.dirty_stores, i) end
    end
    for k, v in pairs(st.entries) do
      cache.bytes = cache.bytes - #k - (v == TOMBSTONE and 0 or #v) - ENTRY_OVERHEAD
    end
    st.entries, st.dirty, st.ndirty = {}, {}, 0
    if st.wtime then st.wtime = {} end
  end
  return cache
end

-- -- Stores ------------------------------------------------------------------

local Store = {}
Store.__index = Store

local TtlStore = setmetatable({}, { __index = Store })
TtlStore.__index = TtlStore

-- new(ptr, name, task, cache [, ttl]): ttl = { ms =, wall = } for a store with a time to
-- live (TtlStore, below).
function M.new(ptr, name, task, cache, ttl)
  local self = setmetatable({ ptr = ptr, name = name, task = task, cache = cache,
                              entries = {}, dirty = {}, ndirty = 0, open_iters = 0 },
                            ttl and TtlStore or Store)
  if ttl then
    self.ttl, self.wall, self.wtime = ttl.ms, ttl.wall, {}
    C.bk_ffi_store_set_ttl(ptr, ttl.ms, ttl.wall and 1 or 0)
  end
  cache.stores[#cache.stores + 1] = self
  return self
end

-- A get the cache did not answer: from RocksDB (through the batch), then cached when the
-- cache is on, with its write time for a store with a time to live.
local function get_through(self, key)
  local cache = self.cache
  cache.misses = cache.misses + 1
  local rc = C.bk_ffi_store_get(self.ptr, key, #key, vptr, vlen)
  if rc == 1 then
    local v = ffi_string(vptr[0], vlen[0])
    if cache.max > 0 then
      self.entries[key] = v
      if self.wtime then self.wtime[key] = tonumber(C.bk_ffi_store_last_wtime(self.ptr)) end
      cache.bytes = cache.bytes + #key + #v + ENTRY_OVERHEAD
      if cache.bytes > cache.max then cache.flush() end
    end
    return v
  elseif rc == 0 then
    return nil
  end
  store_error(self, 2)
end

-- get_time(key) -> value, nil: a store without times (TtlStore's has them).
function Store:get_time(key)
  return self:get(key), nil
end

function Store:get(key)
  check_key(self, key, "get")
  local e = self.entries[key]
  if e ~= nil then
    self.cache.hits = self.cache.hits + 1
    if e == TOMBSTONE then return nil end
    return e
  end
  return get_through(self, key)
end

-- A write's timestamp: the record's (TtlStore's is its write time).
function Store:_wtime()
  return self.task.ts
end

local function cache_write(self, key, value)
  if self.open_iters > 0 then
    error(string_format("store %s: cannot write while an iterator over it is open (read it " ..
                        "to the end or close it first)", self.name), 3)
  end
  local cache, entries = self.cache, self.entries
  local old = entries[key]
  local delta
  if old == nil then
    delta = #key + ENTRY_OVERHEAD + (value == TOMBSTONE and 0 or #value)
  else
    delta = (value == TOMBSTONE and 0 or #value) - (old == TOMBSTONE and 0 or #old)
  end
  entries[key] = value
  cache.bytes = cache.bytes + delta
  if not self.dirty[key] then
    self.dirty[key] = true
    self.ndirty = self.ndirty + 1
    if self.ndirty == 1 then
      cache.dirty_stores[#cache.dirty_stores + 1] = self
    end
  end
  if cache.bytes > cache.max then cache.flush() end
end

-- put(key, value): value nil deletes.
function Store:put(key, value)
  if value == nil then return self:delete(key) end
  check_key(self, key, "put")
  if type(value) ~= "string" then
    error(string_format("store '%s': put: the value must be a string, got %s", self.name,
                        type(value)), 2)
  end
  if self.cache.max == 0 then
    if C.bk_ffi_store_put(self.ptr, key, #key, value, #value, self:_wtime()) ~= 0 then
      store_error(self, 2)
    end
    return
  end
  if self.wtime then self.wtime[key] = self:_wtime() end
  cache_write(self, key, value)
end

function Store:delete(key)
  check_key(self, key, "delete")
  if self.cache.max == 0 then
    if C.bk_ffi_store_delete(self.ptr, key, #key, self:_wtime()) ~= 0 then
      store_error(self, 2)
    end
    return
  end
  if self.wtime then self.wtime[key] = self:_wtime() end
  cache_write(self, key, TOMBSTONE)
end

-- The dirty entries to the store, each at its write time with a time to live, else at the
-- timestamp of the record in hand.
function Store:_flush_dirty()
  if self.ndirty == 0 then return end
  local entries, wtime, ptr, ts = self.entries, self.wtime, self.ptr, self.task.ts
  for key in pairs(self.dirty) do
    local v = entries[key]
    local t = wtime and wtime[key] or ts
    local rc
    if v == TOMBSTONE then
      rc = C.bk_ffi_store_delete(ptr, key, #key, t)
      entries[key] = nil
      if wtime then wtime[key] = nil end
      self.cache.bytes = self.cache.bytes - #key - ENTRY_OVERHEAD
    else
      rc = C.bk_ffi_store_put(ptr, key, #key, v, #v, t)
    end
    if rc ~= 0 then store_error(self, 1) end
  end
  self.dirty = {}
  self.ndirty = 0
end

-- Iterators: callable objects for `for k, v in store:range(a, b) do`. Writes
-- to the store fail while one is open; it closes when read to the end, by
-- :close(), or when collected.
local Iter = {}
Iter.__index = Iter

function Iter:__call()
  local it = self.it
  if it == nil then return nil end
  if C.bk_ffi_store_iter_next(it, kptr, klen, vptr, vlen) == 1 then
    return ffi_string(kptr[0], klen[0]), ffi_string(vptr[0], vlen[0])
  end
  self:close()
  return nil
end

function Iter:close()
  if self.it ~= nil then
    C.bk_ffi_store_iter_free(ffi.gc(self.it, nil))
    self.it = nil
    self.store.open_iters = self.store.open_iters - 1
  end
end

local function iter(self, mode, a, b)
  -- The scan reads the store below the cache: write the cache's dirty
  -- entries of this store first.
  if self.ndirty > 0 then
    self:_flush_dirty()
    local list = self.cache.dirty_stores
    for i = #list, 1, -1 do
      if list[i] == self then table.remove(list, i) end
    end
  end
  local it = C.bk_ffi_store_iter_new(self.ptr, mode, a, a and #a or 0, b, b and #b or 0)
  self.open_iters = self.open_iters + 1
  return setmetatable({ store = self, it = ffi.gc(it, function(p)
    C.bk_ffi_store_iter_free(p)
    self.open_iters = self.open_iters - 1
  end) }, Iter)
end

-- Keys in [from, to], in key order; `to` nil: to the end.
function Store:range(from, to)
  if type(from) ~= "string" or (to ~= nil and type(to) ~= "string") then
    error(string_format("store '%s': range: expected string bounds", self.name), 2)
  end
  return iter(self, C.BK_FFI_ITER_RANGE, from, to)
end

function Store:prefix(p)
  if type(p) ~= "string" then
    error(string_format("store '%s': prefix: expected a string", self.name), 2)
  end
  return iter(self, C.BK_FFI_ITER_PREFIX, p, nil)
end

function Store:all()
  return iter(self, C.BK_FFI_ITER_ALL, nil, nil)
end

-- RocksDB's estimate plus what the cache has not written yet.
function Store:approximate_count()
  return tonumber(C.bk_ffi_store_approximate_count(self.ptr)) + self.ndirty
end

-- -- Stores with a time to live ------------------------------------------------------
-- A value is gone ttl ms after its write time: the record's timestamp against the task's
-- stream time, or with `wall` the wall clock (the test driver's clock in beck.testing).
-- Cached entries keep their write time beside them (wtime); C checks what it reads
-- (runtime/engine/store_internal.h, TTL) against the clock Lua gives it first.

-- The store's clock now.
function TtlStore:_now()
  local task = self.task
  if self.wall then return task.rt.now() end
  local t = task.stream_time
  if task.cur >= 0 and task.ts > t then t = task.ts end
  return t
end

-- A write's time: the record's timestamp (the stream time in a punctuation), or the clock;
-- put_at's time while it writes.
function TtlStore:_wtime()
  if self.at then return self.at end
  local task = self.task
  if self.wall then return task.rt.now() end
  if task.cur >= 0 then return task.ts end
  return task.stream_time
end

function TtlStore:get(key)
  check_key(self, key, "get")
  local now = self:_now()
  local e = self.entries[key]
  if e ~= nil then
    self.cache.hits = self.cache.hits + 1
    if e == TOMBSTONE or now - self.wtime[key] >= self.ttl then return nil end
    return e
  end
  C.bk_ffi_store_set_now(self.ptr, now)
  return get_through(self, key)
end

for _, f in ipairs { "range", "prefix", "all" } do
  local base = Store[f]
  TtlStore[f] = function(self, ...)
    C.bk_ffi_store_set_now(self.ptr, self:_now())
    return base(self, ...)
  end
end

-- get_time(key) -> value, its write time (nil: none): a timestamped store's value and the
-- time it carries (an aggregate's, as Kafka Streams' timestamped stores keep it).
function TtlStore:get_time(key)
  local v = self:get(key)
  if v == nil then return nil end
  if self.wall then return v, nil end -- times of the wall clock, not of the records
  local t = self.wtime[key] -- cached with the value
  if t == nil then t = tonumber(C.bk_ffi_store_last_wtime(self.ptr)) end
  return v, t
end

-- put_at(key, value, time): a put whose write time is `time`, not the record's.
function TtlStore:put_at(key, value, t)
  self.at = t
  local ok, err = pcall(self.put, self, key, value)
  self.at = nil
  if not ok then error(err, 2) end
end

-- The background sweep (at each commit, after the cache's writes): up to `max` entries from
-- where the last one stopped; the expired ones are deleted, tombstoned in the changelog.
-- Returns how many.
function TtlStore:expire(max)
  if self.open_iters > 0 then return 0 end
  C.bk_ffi_store_set_now(self.ptr, self:_now())
  local n = C.bk_ffi_store_expire(self.ptr, max)
  if n < 0 then store_error(self, 2) end
  return tonumber(n)
end

return M
