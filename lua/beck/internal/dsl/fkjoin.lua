-- beck.internal.dsl.fkjoin: foreign-key table-table joins (Kafka Streams' KIP-213):
-- left:join(right, fk_extractor, joiner [, opts]) and left_join, the left table's rows
-- joined with the right table's row whose key fk_extractor(left value) gives, with Kafka
-- Streams 4.4's protocol (docs/dsl.md, "Foreign-key joins"):
--
--   1. subscribe (the left side): a left update sends subscriptions, keyed by foreign key,
--      to <app>-<name>-subscription-repartition (partitioned as the right table): the new
--      foreign key's, and a deletion for the old one when it changed. Each carries an
--      instruction, the left key and a fingerprint (XXH3-128) of the new left value.
--   2. subscriptions (the right side): kept in <name>-subscriptions (foreign key, left
--      key) -> fingerprint; each is answered with the right row as it is now. A right
--      update answers every subscription of its key.
--   3. answers go to <app>-<name>-response-repartition (partitioned as the left table);
--      one whose fingerprint is not the left row's current value's is stale and dropped,
--      so no result of an old foreign key survives a change. The rest give joiner(left,
--      right) or a deletion.
local builder = require "beck.internal.dsl.builder"
local serde = require "beck.serde"
local table_mod = require "beck.internal.dsl.table"
local window = require "beck.internal.dsl.window"
local ffi = require "ffi"
builder.internal()

local C = ffi.C
local char, byte, sub = string.char, string.byte, string.sub
local string_format = string.format
local fail, check_fn = builder.fail, builder.check_fn
local prefix = window.prefix

local M = {}

-- Kafka Streams' SubscriptionWrapper instructions
local DELETE_NO_PROPAGATE, DELETE_AND_PROPAGATE = 1, 2
local PROPAGATE_NULL_IF_NONE, PROPAGATE_ONLY_IF_FOUND = 3, 4

local hbuf = ffi.new("char[16]")
local function fingerprint(raw)
  C.bk_ffi_hash128(raw, #raw, hbuf)
  return ffi.string(hbuf, 16)
end

-- a subscription: [instruction][0 | 1 + 16-byte fingerprint][left key bytes]
local function sub_encode(instr, hash, lk)
  return char(instr) .. (hash and ("\1" .. hash) or "\0") .. lk
end

local function sub_decode(raw)
  local instr, has = byte(raw, 1, 2)
  if has == 1 then return instr, sub(raw, 3, 18), sub(raw, 19) end
  return instr, nil, sub(raw, 3)
end

-- an answer: [flags: 1 fingerprint, 2 right value][fingerprint][right value bytes]
local function resp_encode(hash, rv)
  return char((hash and 1 or 0) + (rv and 2 or 0)) .. (hash or "") .. (rv or "")
end

local function resp_decode(raw)
  local flags = byte(raw, 1)
  local at, hash, rv = 2, nil, nil
  if flags % 2 == 1 then
    hash = sub(raw, 2, 17)
    at = 18
  end
  if flags >= 2 then rv = sub(raw, at) end
  return hash, rv
end

-- what the subscribe side remembers of a left row: "" (there, no foreign key) or "\1" ..
-- the foreign key's bytes
local function fk_memo(fkb) return fkb and ("\1" .. fkb) or "" end

-- fk_join(l, r, fk, joiner, opts, kind, where) -> the result table
function M.fk_join(l, r, fk, joiner, opts, kind, where)
  check_fn(fk, kind .. ": foreign key extractor")
  check_fn(joiner, kind .. ": joiner")
  if not l.getter or not r.getter then fail("%s: a windowed table cannot be joined", kind) end
  if kind == "outer_join" then
    fail("outer_join: a foreign-key join is join or left_join (as in Kafka Streams)")
  end
  local b = l.b
  local left = kind == "left_join"
  local name = b:name("fk_" .. kind, opts.name)
  local fkser = b:serde(opts.foreign_key_serde, r.kser, kind .. ": foreign_key_serde")
  local lks, lkd, lvs = l.kser.serialize, l.kser.deserialize, l.vser.serialize
  local rks, rvs, rvd = r.kser.serialize, r.vser.serialize, r.vser.deserialize
  local fks = fkser.serialize
  local memo = b:derived(name .. "-fk")
  local subs = b:derived(name .. "-subscriptions")
  local w = string_format("%s (%s)", kind, where)
  local kw, vw, fw = w .. ": left key: ", w .. ": left value: ", w .. ": foreign key: "
  local rvw = w .. ": right value: "

  -- 1. subscribe: on the left table's updates
  local subscribe = b:derived(name .. "-subscribe")
  b:processor(subscribe, kind, {
    init = function(ctx) ctx.memo = ctx:store(memo) end,
    process = function(ctx, k, v)
      if k == nil then return end
      local lk = lks(k, kw)
      local old = ctx.memo:get(lk) -- nil: no row before
      local oldfk = old ~= nil and #old > 0 and sub(old, 2) or nil
      local newfk = nil
      if v ~= nil then
        local f = fk(v)
        if f ~= nil then newfk = fks(f, fw) end
      end
      local hash = v ~= nil and fingerprint(lvs(v, vw)) or nil
      local function send(fkb, instr) ctx:forward(fkb, sub_encode(instr, hash, lk)) end
      if v == nil then ctx.memo:delete(lk) else ctx.memo:put(lk, fk_memo(newfk)) end
      if left then
        if old ~= nil then
          -- The old key's subscription goes without an answer. Kafka Streams 4.4 has it
          -- answered (DELETE_KEY_AND_PROPAGATE, with the new value's fingerprint): that
          -- answer, joiner(v, nil), comes from the old key's task, and when it arrives after
          -- the new key's answer it is the row's last result, though the new key has a
          -- right row (4-partition parity runs saw it). The new key's answer alone gives
          -- the row's result, joiner(v, right row or nil), or a deletion for a deletion.
          if oldfk ~= nil and oldfk ~= newfk then send(oldfk, DELETE_NO_PROPAGATE) end
          send(newfk, PROPAGATE_NULL_IF_NONE)
        elseif v ~= nil then
          send(newfk, PROPAGATE_NULL_IF_NONE)
        end
      else
        if old ~= nil then
          if oldfk == nil then return end -- skipped: no foreign key (Kafka Streams logs it)
          if v ~= nil then
            if newfk == nil then return end
            if newfk ~= oldfk then send(oldfk, DELETE_NO_PROPAGATE) end
            send(newfk, PROPAGATE_NULL_IF_NONE)
          else
            send(oldfk, DELETE_AND_PROPAGATE)
          end
        elseif v ~= nil and newfk ~= nil then
          send(newfk, PROPAGATE_ONLY_IF_FOUND)
        end
      end
    end,
  }, { l.node }, where)
  b:store(memo, { changelog = opts.changelog, key_serde = l.kser.name }, subscribe, kind, where)
  local sub_in = b:repartition(subscribe, name .. "-subscription", serde.string, serde.string,
                               where)

  -- 2. the subscriptions, answered with the right row (both on the right table's tasks)
  local answer = b:derived(name .. "-answer")
  -- an answer goes at `ts` (default the record's): a subscription's answer at the later of
  -- it and the right row, as Kafka Streams' SubscriptionJoinProcessor stamps it
  local function reply(ctx, lk, hash, rv, ts)
    ctx:forward_at(ts or ctx:timestamp(), lk, resp_encode(hash, rv ~= nil and rvs(rv, rvw) or nil))
  end
  b:processor(answer, kind, {
    init = function(ctx)
      ctx.subs = ctx:store(subs)
      ctx.get = r.getter(ctx)
      ctx.fkd = fkser.deserialize
    end,
    process = function(ctx, fkb, raw)
      if raw == nil then return end
      local instr, hash, lk = sub_decode(raw)
      if fkb == nil then
        -- a left join's row without a foreign key: answered with no right row
        if instr == PROPAGATE_NULL_IF_NONE then reply(ctx, lk, hash, nil) end
        return
      end
      local sk = prefix(fkb) .. lk
      if instr == DELETE_NO_PROPAGATE or instr == DELETE_AND_PROPAGATE then
        ctx.subs:delete(sk)
      else
        ctx.subs:put(sk, hash or "")
      end
      if instr == DELETE_AND_PROPAGATE then
        reply(ctx, lk, hash, nil)
      elseif instr ~= DELETE_NO_PROPAGATE then
        local rv, rts = ctx.get(ctx.fkd(fkb, fw))
        local ts = ctx:timestamp()
        if rv ~= nil and rts ~= nil and rts > ts then ts = rts end
        if rv ~= nil or instr == PROPAGATE_NULL_IF_NONE then reply(ctx, lk, hash, rv, ts) end
      end
    end,
  }, { sub_in }, where)
  -- (a window-layout store: its keys sit under the foreign key's group, as its task's)
  b:store(subs, { changelog = opts.changelog, kind = "window" }, answer, kind, where)

  -- a right update answers every subscription of its key
  local notify = b:derived(name .. "-notify")
  b:processor(notify, kind, {
    init = function(ctx) ctx.subs = ctx:store(subs) end,
    process = function(ctx, rk, rv)
      if rk == nil then return end
      local p = prefix(rks(rk, fw))
      local found = {}
      for sk, hash in ctx.subs:prefix(p) do found[#found + 1] = { sub(sk, #p + 1), hash } end
      for i = 1, #found do
        local h = found[i][2]
        reply(ctx, found[i][1], #h > 0 and h or nil, rv)
      end
    end,
  }, { r.node }, where)
  b:use_store(subs, notify)
  r:needs(answer)

  -- 3. the answers, back on the left table's tasks
  local answers = b:derived(name .. "-answers")
  b:processor(answers, kind, { process = function(ctx, k, v) ctx:forward(k, v) end },
              { answer, notify }, where)
  local resp_in = b:repartition(answers, name .. "-response", serde.string, serde.string, where)
  local vser = b:serde(opts.result_serde, nil, kind .. ": result_serde")
  local store = opts.store or b:derived(name .. "-store")
  local vs = vser.serialize
  local sw = string_format("%s: store %s: value: ", w, tostring(store))
  b:processor(name, kind, {
    init = function(ctx)
      ctx.get = l.getter(ctx)
      ctx.st = ctx:store(store)
    end,
    process = function(ctx, lk, raw)
      if lk == nil or raw == nil then return end
      local hash, rvb = resp_decode(raw)
      local k = lkd(lk, kw)
      local cur = ctx.get(k)
      local curhash = cur ~= nil and fingerprint(lvs(cur, vw)) or nil
      if hash ~= curhash then return end -- stale: the left row changed since
      local result = nil
      if rvb ~= nil or (left and cur ~= nil) then
        result = joiner(cur, rvb ~= nil and rvd(rvb, rvw) or nil, k)
      end
      if result == nil then ctx.st:delete(lk) else ctx.st:put(lk, vs(result, sw)) end
      ctx:forward(k, result)
    end,
  }, { resp_in }, where)
  -- (sharing the left table's stores puts the answers' reader in its task, as sharing the
  -- subscriptions puts the right table's updates with the subscriptions)
  l:needs(name)
  -- the result is kept: a lookup of it could not reach the right row, which lives on
  -- another task
  b:store(store, { changelog = opts.changelog, key_serde = l.kser.name, value_serde = vser.name },
          name, kind, where)
  return table_mod.materialized(b, name, store, l.kser, vser)
end

builder.provide("fkjoin", M)

return M
