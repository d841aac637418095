-- beck.internal.versioned: a versioned key-value store (Kafka Streams' VersionedKeyValueStore,
-- KIP-889) on top of a store with the window layout (beck.internal.layout): every
-- version of a key within the history retention, read as of a time.
--
-- Keys, p = [4-byte length][key] (so every entry sits under its key's key group):
--   p .. ff*8                      the latest version: [8-byte time][1: value, 0: deleted][value]
--   p .. [valid to] .. [time]      an older version, valid from time up to valid to (excluded):
--                                  [1 | 0][value]
--   ff*4 .. [valid to] .. p .. [time]    its index entry, for expiry by valid to
--   ff*4 .. 01 [time, 7 bytes] .. p      the latest version's time, so the store's newest time
--                                        (its "observed stream time") is found again at open
-- As in Kafka Streams' RocksDBVersionedStore: a put older than the newest time put less the
-- history retention is refused; a read as of a time older than that sees the latest version
-- only (when it is not newer than that time); the latest version never expires.
local layout = require "beck.internal.layout"

local sub = string.sub
local getmetatable, setmetatable, ipairs = getmetatable, setmetatable, ipairs
local string_format = string.format
local be64, dec64, prefix, index = layout.be64, layout.dec64, layout.prefix, layout.index
local IDX, TOP = layout.IDX, layout.TOP

local M = {}

-- put's answers besides a valid-to time, as Kafka Streams' VersionedKeyValueStore gives them
M.IS_LATEST = -1        -- PUT_RETURN_CODE_VALID_TO_UNDEFINED: the put is the latest version
M.NOT_PUT = -math.huge  -- PUT_RETURN_CODE_NOT_PUT (Long.MIN_VALUE): older than the retention

local Versioned = {}
Versioned.__index = Versioned

local function lidx(p, t)
  return IDX .. "\1" .. sub(be64(t), 2) .. p
end

-- of(raw store, retention ms, stream time) -> the store's versioned face, one per task's
-- store (every processor of the task shares it, and its newest time). That time is found
-- again at open from the latest versions' times (the ff*4 01 entries): among those within
-- the retention of the task's stream time when there are any (the newest is), else all.
function M.of(raw, retention, stream_time)
  if getmetatable(raw) == Versioned then return raw end
  if raw._versioned then return raw._versioned end
  local self = setmetatable({ st = raw, retention = retention, name = raw.name, observed = -1 },
                            Versioned)
  local hi = IDX .. "\1\255\255\255\255\255\255\255"
  local from = stream_time and stream_time - retention or 0
  for _, lo in ipairs { from > 0 and from or 0, 0 } do
    for k in raw:range(IDX .. "\1" .. sub(be64(lo), 2), hi) do
      local t = dec64("\0" .. sub(k, 6, 12), 1)
      if t > self.observed then self.observed = t end
    end
    if self.observed >= 0 or lo == 0 then break end
  end
  raw._versioned = self
  return self
end

local function decode_latest(raw)
  if raw == nil then return nil end
  local t = dec64(raw, 1)
  if sub(raw, 9, 9) == "\1" then return t, sub(raw, 10) end
  return t, nil
end

-- get(key) -> the latest value (nil: none, or deleted), its time
function Versioned:get(key)
  local t, v = decode_latest(self.st:get(prefix(key) .. TOP))
  return v, t
end

-- get_as_of(key, time) -> the value valid at `time` (nil: none), the time it was put
function Versioned:get_as_of(key, at)
  local p = prefix(key)
  local lt, lv = decode_latest(self.st:get(p .. TOP))
  if lt ~= nil and lt <= at then return lv, lt end
  if self.observed >= 0 and at < self.observed - self.retention then return nil end
  if lt == nil then return nil end
  -- the first older version still valid after `at`
  local it = self.st:range(p .. be64(at + 1), p .. be64(lt) .. TOP)
  local k, raw = it()
  it:close()
  if k == nil then return nil end
  local t0 = dec64(k, #p + 9)
  if t0 > at then return nil end -- `at` falls in a gap before that version
  if sub(raw, 1, 1) == "\1" then return sub(raw, 2), t0 end
  return nil, t0
end

local function put_history(st, p, valid_to, t, flagged)
  local t8, v8 = be64(t), be64(valid_to)
  st:put(p .. v8 .. t8, flagged)
  st:put(index(p, v8, t8), "")
end

local function del_history(st, p, valid_to, t)
  local t8, v8 = be64(t), be64(valid_to)
  st:delete(p .. v8 .. t8)
  st:delete(index(p, v8, t8))
end

-- put(key, value or nil, time) -> M.IS_LATEST, the valid-to time of an older version it
-- became, or M.NOT_PUT (older than the history retention)
function Versioned:put(key, value, t)
  local st = self.st
  if self.observed >= 0 and t < self.observed - self.retention then return M.NOT_PUT end
  if t > self.observed then self.observed = t end
  local p = prefix(key)
  local flagged = value ~= nil and ("\1" .. value) or "\0"
  local lraw = st:get(p .. TOP)
  local lt = lraw and dec64(lraw, 1)
  if lt == nil or t >= lt then
    if lt ~= nil and t > lt then
      put_history(st, p, t, lt, sub(lraw, 9)) -- the latest becomes history, valid to t
    end
    if lt ~= nil then st:delete(lidx(p, lt)) end
    st:put(p .. TOP, be64(t) .. flagged)
    st:put(lidx(p, t), "")
    return M.IS_LATEST
  end
  -- older than the latest: into the history, where it falls
  local it = st:range(p .. be64(t + 1), p .. be64(lt) .. TOP)
  local k, raw = it()
  it:close()
  local valid_to = lt
  if k ~= nil then
    local v = dec64(k, #p + 1)
    local t0 = dec64(k, #p + 9)
    if t0 == t then
      st:put(k, flagged) -- the same time: replaced
      return v
    elseif t0 < t then
      -- splits that version: it ends at t, this one runs to its end
      del_history(st, p, v, t0)
      put_history(st, p, t, t0, raw)
      valid_to = v
    else
      valid_to = t0 -- before that version, in a gap
    end
  end
  put_history(st, p, valid_to, t, flagged)
  return valid_to
end

function Versioned:delete(key, t)
  return self:put(key, nil, t)
end

-- Deletes the older versions no read can see any more (valid to below the newest time less
-- the retention).
function Versioned:expire()
  if self.observed < 0 then return 0 end
  return layout.expire(self.st, self.observed - self.retention)
end

function Versioned:range() error(string_format("versioned store '%s': no scans", self.name), 2) end

return M
