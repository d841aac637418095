-- beck.serde: how the DSL (beck.dsl) turns Lua values into the strings that
-- topics and stores hold, and back. A serde is a table
-- { serialize = fn(value) -> string | nil, deserialize = fn(string) -> value };
-- nil stays nil both ways (a tombstone). Built in: string (the default),
-- json (lua-cjson) and number. See docs/dsl.md, "Serdes".
local cjson = require "cjson"

local type, tostring, tonumber, error, getmetatable, setmetatable = type, tostring, tonumber,
                                                                   error, getmetatable, setmetatable
local floor, string_format = math.floor, string.format

local M = {}

-- -- Windowed keys -------------------------------------------------------------
-- What a windowed aggregation forwards as its key: { key =, start =, ["end"] = }.

local Windowed, Session = {}, {}
M.Windowed, M.Session = Windowed, Session

-- Numbers as Kafka users expect them: integers without ".0" or exponent,
-- other numbers with as many digits as they need to read back equal.
local function number_string(n)
  if n == floor(n) and n > -9007199254740992 and n < 9007199254740992 then
    return string_format("%d", n)
  end
  local s = string_format("%.14g", n)
  if tonumber(s) ~= n then s = string_format("%.17g", n) end
  return s
end
M.number_string = number_string

-- A time window's key as text: "key@start" (its size gives the end).
function Windowed.__tostring(w)
  local k = w.key
  return (type(k) == "number" and number_string(k) or tostring(k)) .. "@" ..
         number_string(w.start)
end

-- A session's: "key@start/end", since a session's end moves as it grows.
function Session.__tostring(w)
  return Windowed.__tostring(w) .. "/" .. number_string(w["end"])
end

-- windowed(key, start, end_): a time window [start, end_).
function M.windowed(key, start, end_)
  return setmetatable({ key = key, start = start, ["end"] = end_ }, Windowed)
end

-- session(key, start, end_): a session [start, end_] (both inclusive, as
-- in Kafka Streams).
function M.session(key, start, end_)
  return setmetatable({ key = key, start = start, ["end"] = end_ }, Session)
end

function M.is_windowed(x)
  local mt = getmetatable(x)
  return mt == Windowed or mt == Session
end

-- -- Built-in serdes -----------------------------------------------------------

-- string: strings as they are; numbers and booleans as text; a windowed key
-- as "key@start" (a session: "key@start/end"). Reads give strings. A table
-- is an error that says what to do.
local function string_serialize(v, where)
  local t = type(v)
  if t == "string" or v == nil then return v end
  if t == "number" then return number_string(v) end
  if t == "boolean" then return tostring(v) end
  local mt = getmetatable(v)
  if mt == Windowed or mt == Session then return tostring(v) end
  error(string_format("%sthe string serde cannot write a %s; give a serde such as " ..
                      "value_serde = \"json\" (docs/dsl.md, Serdes)", where or "", t), 0)
end

M.string = { name = "string", identity = true, serialize = string_serialize,
             deserialize = function(s) return s end }

-- json: lua-cjson on its own instance (settings of the user's cjson do not
-- leak in). Numbers keep 14 significant digits (lua-cjson's limit).
local json = cjson.new()
local json_encode, json_decode = json.encode, json.decode
local safe = require("cjson.safe").new()
local safe_decode = safe.decode

M.json = {
  name = "json",
  serialize = function(v, where)
    if v == nil then return nil end
    if type(v) == "function" or type(v) == "userdata" then
      error(string_format("%sthe json serde cannot write a %s", where or "", type(v)), 0)
    end
    return json_encode(v)
  end,
  deserialize = function(s, where)
    if s == nil then return nil end
    local v, err = safe_decode(s)
    if v == nil and err then
      error(string_format("%snot JSON (%s): %s", where or "", err,
                          #s > 60 and s:sub(1, 60) .. "..." or s), 0)
    end
    return v
  end,
}
M.json_null = json.null

-- number: a decimal string; reads give numbers.
M.number = {
  name = "number",
  serialize = function(v, where)
    if v == nil then return nil end
    local n = tonumber(v)
    if n == nil then
      error(string_format("%sthe number serde cannot write %s", where or "", tostring(v)), 0)
    end
    return number_string(n)
  end,
  deserialize = function(s, where)
    if s == nil then return nil end
    local n = tonumber(s)
    if n == nil then
      error(string_format("%snot a number: %s", where or "", s), 0)
    end
    return n
  end,
}

-- -- Kafka Streams' windowed keys ------------------------------------------------
-- The bytes of Kafka Streams' TimeWindowedSerde and SessionWindowedSerde, so that a Java
-- consumer reads a beck topic with WindowedSerdes.timeWindowedSerdeFrom(String.class,
-- size) / sessionWindowedSerdeFrom(String.class): a time window is [key][start: 8 bytes
-- big-endian], a session [key][end: 8 bytes][start: 8 bytes], the key written by the inner
-- serde (default string).

local char, byte, sub = string.char, string.byte, string.sub

local function be64(n, where)
  if type(n) ~= "number" or n < 0 or n >= 9007199254740992 or n ~= floor(n) then
    error(string_format("%sa window time must be a whole number of ms in [0, 2^53), got %s",
                        where or "", tostring(n)), 0)
  end
  local b = {}
  for i = 8, 1, -1 do
    b[i] = n % 256
    n = (n - b[i]) / 256
  end
  return char(b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8])
end

local function dec64(s, i)
  local n = 0
  for j = i, i + 7 do n = n * 256 + byte(s, j) end
  return n
end

local function windowed_serde(name, inner, tail, make, level)
  inner = M.of(inner, nil, (level or 1) + 1)
  local ks, kd = inner.serialize, inner.deserialize
  return {
    name = name,
    serialize = function(w, where)
      if w == nil then return nil end
      local mt = getmetatable(w)
      if mt ~= Windowed and mt ~= Session then
        error(string_format("%sthe %s serde writes windowed keys (a windowed aggregation's), " ..
                            "got a %s", where or "", name, type(w)), 0)
      end
      local k = ks(w.key, where)
      if mt == Session or tail == 16 then
        return k .. be64(w["end"], where) .. be64(w.start, where)
      end
      return k .. be64(w.start, where)
    end,
    deserialize = function(s, where)
      if s == nil then return nil end
      if #s < tail then
        error(string_format("%snot a %s key: %d bytes, fewer than %d", where or "", name, #s,
                            tail), 0)
      end
      return make(kd(sub(s, 1, #s - tail), where), s, #s - tail + 1)
    end,
  }
end

-- time_windowed(size [, key_serde]): Kafka Streams' TimeWindowedSerde of that window size.
function M.time_windowed(size, inner)
  if type(size) ~= "number" or size < 1 or size ~= floor(size) then
    error("time_windowed: expected the window size in ms (> 0), got " .. tostring(size), 2)
  end
  return windowed_serde("time_windowed", inner, 8, function(k, s, i)
    local start = dec64(s, i)
    return M.windowed(k, start, start + size)
  end, 2)
end

-- session_windowed([key_serde]): Kafka Streams' SessionWindowedSerde.
function M.session_windowed(inner)
  return windowed_serde("session_windowed", inner, 16, function(k, s, i)
    return M.session(k, dec64(s, i + 8), dec64(s, i))
  end, 2)
end

local BY_NAME = { string = M.string, json = M.json, number = M.number }

-- custom { serialize = fn, deserialize = fn [, name = ] }: checks its shape
-- now, not at the first record.
function M.custom(t, level)
  if type(t) ~= "table" or type(t.serialize) ~= "function"
     or type(t.deserialize) ~= "function" then
    error("serde: expected \"string\", \"json\", \"number\" or a table with serialize and " ..
          "deserialize functions", (level or 1) + 1)
  end
  if t.name == nil then
    return { name = "custom", serialize = t.serialize, deserialize = t.deserialize }
  end
  return t
end

-- of(spec [, default]) -> a serde: spec is a name, a serde table, or nil
-- (then `default`, else string). Wrong specs raise at the caller's caller.
function M.of(spec, default, level)
  level = (level or 1) + 1
  if spec == nil then return default or M.string end
  if type(spec) == "string" then
    local s = BY_NAME[spec]
    if not s then
      error(string_format("serde: unknown serde '%s' (string, json, number or a table)", spec),
            level)
    end
    return s
  end
  return M.custom(spec, level)
end

return M
