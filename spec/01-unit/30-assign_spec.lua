-- The assignor (runtime/cluster/assign.c) through FFI: its guarantees as properties over random
-- memberships and churn, and a few cases by hand. Everything here is computed from the
-- result again in Lua, independently of the C code; docs/assignment.md states the bounds.
local ffi = require "ffi"
require "beck.internal.runtime" -- loads the cdefs
local C = ffi.C

local bit = require "bit"
local floor, min, max = math.floor, math.min, math.max
local random = math.random

-- -- Running the assignor ---------------------------------------------------------------------

-- A cluster in Lua: members = { {id=, rack=, threads=}, ... } in table order; prev = a result
-- of run() or nil (placements by id, so members may come and go); lags = { {t, id, lag} }.
local ibuf = ffi.new("int32_t[16]")
local kbuf = ffi.new("int32_t[1]")
local stats = ffi.new("int32_t[4]")

local function run(members, T, K, prev, lags, warm, bare)
  local b = ffi.gc(C.bk_ffi_assign_new(T, K), C.bk_ffi_assign_free)
  if warm then C.bk_ffi_assign_set_warmup(b, 1, warm) end
  for t in pairs(bare or {}) do assert(C.bk_ffi_assign_set_no_standby(b, t) == 0) end
  local index = {}
  for i, m in ipairs(members) do
    local idx = C.bk_ffi_assign_add_member(b, m.id, m.rack, nil, m.threads)
    assert(idx == i - 1)
    index[m.id] = idx
  end
  if prev then
    for t = 0, T - 1 do
      local a = prev.active[t]
      local n = 0
      for _, s in ipairs(prev.standby[t]) do
        ibuf[n] = index[s] or -1
        n = n + 1
      end
      assert(C.bk_ffi_assign_set_prev(b, t, a and index[a] or -1, ibuf, n) == 0)
    end
  end
  for _, l in ipairs(lags or {}) do
    if index[l[2]] then
      assert(C.bk_ffi_assign_add_lag(b, l[1], index[l[2]], l[3]) == 0)
    end
  end
  if C.bk_ffi_assign_compute(b) ~= 0 then
    return nil, ffi.string(C.bk_ffi_assign_error(b))
  end
  local act, sb = C.bk_ffi_assign_active(b), C.bk_ffi_assign_standby(b, kbuf)
  local k = kbuf[0]
  local res = { active = {}, standby = {}, k = k }
  for t = 0, T - 1 do
    res.active[t] = members[act[t] + 1].id
    local row = {}
    for j = 0, k - 1 do
      if sb[t * k + j] >= 0 then row[#row + 1] = members[sb[t * k + j] + 1].id end
    end
    res.standby[t] = row
  end
  C.bk_ffi_assign_stats(b, stats, stats + 1, stats + 2, stats + 3)
  res.moved, res.min_moved, res.orphaned, res.promoted = stats[0], stats[1], stats[2], stats[3]
  res.warmups = C.bk_ffi_assign_warmups(b)
  return res
end

local function same(a, b, T)
  for t = 0, T - 1 do
    if a.active[t] ~= b.active[t] then return false end
    for j = 1, a.k do
      if a.standby[t][j] ~= b.standby[t][j] then return false end
    end
  end
  return a.k == b.k
end

-- -- Checking a result ----------------------------------------------------------------------

local UNKNOWN = 2 ^ 52 -- a previous standby without a report: after every reported lag

-- Lag key of each (task, member id), as assign.h defines it.
-- Only for the tasks in `wanted` (a set): keys[t][id].
local function lag_keys(members, prev, lags, wanted)
  local present = {}
  for _, m in ipairs(members) do present[m.id] = true end
  local keys, reported = {}, {}
  for t in pairs(wanted) do keys[t] = {}; reported[t] = {} end
  for _, l in ipairs(lags) do
    local t, id, lag = l[1], l[2], l[3]
    if wanted[t] and present[id] then
      keys[t][id] = reported[t][id] and min(keys[t][id], lag) or lag
      reported[t][id] = true
    end
  end
  for t in pairs(wanted) do
    for _, s in ipairs(prev.standby[t]) do
      if present[s] and not reported[t][s] then
        keys[t][s] = min(keys[t][s] or UNKNOWN, UNKNOWN)
      end
    end
    local a = prev.active[t]
    if a and present[a] and not reported[t][a] then keys[t][a] = 0 end
  end
  return keys
end

local function quota(members, total)
  local C = 0
  for _, m in ipairs(members) do C = C + m.threads end
  local f, up = floor(total / C), (total % C > 0) and 1 or 0
  local lo, hi = {}, {}
  for _, m in ipairs(members) do lo[m.id], hi[m.id] = m.threads * f, m.threads * (f + up) end
  return lo, hi
end

local tally = { orphans = 0, orphans_with_state = 0, promoted = 0, steps = 0,
                standby_balanced = 0, standby_checked = 0, k1_feasible = 0 }

-- Max flow (Edmonds-Karp) on a small graph: g.adj[u] = list of edge ids; edge e = to[e],
-- cap[e], and e's reverse is e ~ 1 (edges come in pairs 0/1, 2/3, ...).
local function graph() return { adj = {}, to = {}, cap = {}, n = 0 } end
local function edge(g, u, v, c)
  for _, pair in ipairs({ { u, v, c }, { v, u, 0 } }) do
    local e = g.n
    g.to[e], g.cap[e] = pair[2], pair[3]
    g.adj[pair[1]] = g.adj[pair[1]] or {}
    table.insert(g.adj[pair[1]], e)
    g.n = g.n + 1
  end
end
local function maxflow(g, s, t)
  local flow = 0
  while true do
    local via, queue, head = { [s] = -1 }, { s }, 1
    while head <= #queue and via[t] == nil do
      local u = queue[head]; head = head + 1
      for _, e in ipairs(g.adj[u] or {}) do
        local v = g.to[e]
        if g.cap[e] > 0 and via[v] == nil then via[v] = e; queue[#queue + 1] = v end
      end
    end
    if via[t] == nil then return flow end
    local push, v = math.huge, t
    while v ~= s do local e = via[v]; push = min(push, g.cap[e]); v = g.to[bit.bxor(e, 1)] end
    v = t
    while v ~= s do
      local e = via[v]
      g.cap[e] = g.cap[e] - push; g.cap[bit.bxor(e, 1)] = g.cap[bit.bxor(e, 1)] + push
      v = g.to[bit.bxor(e, 1)]
    end
    flow = flow + push
  end
end

-- With one standby a task (K' = 1), could every member's standby count be within [lo, hi]
-- for these actives? The standby of a task must avoid its active's rack (R >= 2) or node
-- (R = 1): tasks fall into classes (that rack, or that node), each class feeds the members
-- it may use. A flow with lower bounds (each class exactly its size, each member lo..hi),
-- made a plain max flow through a super source and sink.
local function standby_balance_feasible(members, T, res, rack_of, nracks, slo, shi)
  local g, excess = graph(), {}
  local function bounded(u, v, l, h)
    edge(g, u, v, h - l)
    excess[v] = (excess[v] or 0) + l
    excess[u] = (excess[u] or 0) - l
  end
  local size = {}
  for t = 0, T - 1 do
    local c = nracks >= 2 and rack_of[res.active[t]] or res.active[t]
    size[c] = (size[c] or 0) + 1
  end
  for c, n in pairs(size) do
    bounded("s", "c:" .. c, n, n)
    for _, m in ipairs(members) do
      if (nracks >= 2 and m.rack ~= c) or (nracks < 2 and m.id ~= c) then
        edge(g, "c:" .. c, "m:" .. m.id, T)
      end
    end
  end
  for _, m in ipairs(members) do bounded("m:" .. m.id, "t", slo[m.id], shi[m.id]) end
  edge(g, "t", "s", T)
  local need = 0
  for node, x in pairs(excess) do
    if x > 0 then edge(g, "S", node, x); need = need + x
    elseif x < 0 then edge(g, node, "T", -x) end
  end
  return maxflow(g, "S", "T") == need
end

-- Checks every guarantee of res for the cluster; prev/lags: what it was computed from.
local function check(members, T, K, prev, lags, res)
  local n = #members
  local rack_of, racks, nracks = {}, {}, 0
  for _, m in ipairs(members) do
    rack_of[m.id] = m.rack
    if not racks[m.rack] then racks[m.rack] = true; nracks = nracks + 1 end
  end
  local Kp = min(K, n - 1)
  assert.equal(Kp, res.k)
  local want = min(nracks, Kp + 1)

  -- Balance of actives: each thread floor or ceil of T / threads.
  local lo, hi = quota(members, T)
  local acount, scount = {}, {}
  for _, m in ipairs(members) do acount[m.id], scount[m.id] = 0, 0 end
  for t = 0, T - 1 do
    local a, row = res.active[t], res.standby[t]
    acount[a] = acount[a] + 1
    -- Never two replicas on a node; racks spread as far as they go. (A few replicas at
    -- most: pairwise comparisons, no tables.)
    assert(#row == Kp)
    local nr = 1
    for j = 1, Kp do
      local s = row[j]
      scount[s] = scount[s] + 1
      local new_rack = rack_of[s] ~= rack_of[a]
      assert(s ~= a, "a standby on its active's node")
      for i = 1, j - 1 do
        assert(row[i] ~= s, "two standbys of a task on one node")
        if rack_of[row[i]] == rack_of[s] then new_rack = false end
      end
      if new_rack then nr = nr + 1 end
    end
    if nr ~= want then error(("task %d spans %d racks, %d possible"):format(t, nr, want)) end
  end
  for _, m in ipairs(members) do
    local a = acount[m.id]
    assert(a >= lo[m.id] and a <= hi[m.id],
           ("member %s: %d actives outside [%d, %d]"):format(m.id, a, lo[m.id], hi[m.id]))
  end

  -- Standbys: within their quota, or no single move that keeps the rules would get closer.
  if Kp > 0 then
    local slo, shi = quota(members, T * Kp)
    local ok = true
    for _, m in ipairs(members) do
      if scount[m.id] < slo[m.id] or scount[m.id] > shi[m.id] then ok = false end
    end
    tally.standby_checked = tally.standby_checked + 1
    if ok then
      tally.standby_balanced = tally.standby_balanced + 1
    end
    -- One standby a task: balanced whenever any placement of the standbys could be.
    if Kp == 1 and standby_balance_feasible(members, T, res, rack_of, nracks, slo, shi) then
      tally.k1_feasible = tally.k1_feasible + 1
      assert(ok, "standbys out of quota though the racks and nodes allow a balance")
    end
    if not ok then
      -- Who could receive: members below their lower bound (from anyone above theirs), and
      -- members below their upper bound (from anyone above theirs).
      local below_lo, below_hi = {}, {}
      for _, m in ipairs(members) do
        if scount[m.id] < slo[m.id] then below_lo[#below_lo + 1] = m end
        if scount[m.id] < shi[m.id] then below_hi[#below_hi + 1] = m end
      end
      for t = 0, T - 1 do
        local row = res.standby[t]
        for j, o in ipairs(row) do
          local over = scount[o] > shi[o]
          local receivers = over and below_hi or below_lo
          if scount[o] > slo[o] and #receivers > 0 then
            -- The racks of the other replicas.
            local a = res.active[t]
            local others, no, holds = { [rack_of[a]] = true }, 1, { [a] = true }
            for i, s in ipairs(row) do
              if i ~= j then
                holds[s] = true
                if not others[rack_of[s]] then others[rack_of[s]] = true; no = no + 1 end
              end
            end
            for _, u in ipairs(receivers) do
              local uid = u.id
              if uid ~= o and not holds[uid] and
                 (no + (others[rack_of[uid]] and 0 or 1)) >= want then
                error(("standby of task %d could move from %s (%d, quota %d..%d) to %s "
                       .. "(%d, quota %d..%d)"):format(t, o, scount[o], slo[o], shi[o], uid,
                                                       scount[uid], slo[uid], shi[uid]))
              end
            end
          end
        end
      end
    end
  end

  if not prev then return end
  tally.steps = tally.steps + 1

  -- Stickiness: tasks leaving a present previous active number exactly the least any
  -- balanced assignment needs: sum over members of max(0, kept - hi) + max(0, sum of
  -- clamp(kept, lo, hi) - T), where kept = tasks whose previous active it is.
  local present, kept = {}, {}
  for _, m in ipairs(members) do present[m.id] = true; kept[m.id] = 0 end
  local moved, orphans = 0, {}
  for t = 0, T - 1 do
    local p = prev.active[t]
    if p and present[p] then
      kept[p] = kept[p] + 1
      if res.active[t] ~= p then moved = moved + 1 end
    else
      orphans[#orphans + 1] = t
    end
  end
  local forced, clamp = 0, 0
  for _, m in ipairs(members) do
    local k, l, h = kept[m.id], lo[m.id], hi[m.id]
    forced = forced + max(0, k - h)
    clamp = clamp + min(max(k, l), h)
  end
  local least = forced + max(0, clamp - T)
  assert(moved == least, ("moved %d actives, %d needed"):format(moved, least))
  assert.equal(least, res.min_moved)
  assert.equal(moved, res.moved)
  assert.equal(#orphans, res.orphaned)

  -- Caught-up first: a task whose active changed could not go to a lower-lag member by a
  -- swap that keeps balance (the lower-lag member below its upper bound, the chosen one
  -- above its lower bound).
  local changed = {}
  for t = 0, T - 1 do
    if res.active[t] ~= prev.active[t] then changed[t] = true end
  end
  local keys = lag_keys(members, prev, lags, changed)
  for t in pairs(changed) do
    local y = res.active[t]
    do
      local ky = keys[t][y] or math.huge
      for id, k in pairs(keys[t]) do
        if k < ky and id ~= y then
          assert(not (acount[id] < hi[id] and acount[y] > lo[y]),
                 ("task %d went to %s (lag %s), %s (lag %s) had room"):format(t, y, ky, id, k))
        end
      end
    end
  end
  for _, t in ipairs(orphans) do
    local best
    for _, k in pairs(keys[t]) do best = min(best or k, k) end
    tally.orphans = tally.orphans + 1
    if best then
      tally.orphans_with_state = tally.orphans_with_state + 1
      if keys[t][res.active[t]] == best then tally.promoted = tally.promoted + 1 end
    end
  end
end

-- -- Random clusters and churn -------------------------------------------------------------

local serial = 0
local function new_member(nracks)
  serial = serial + 1
  return { id = ("m%05d"):format(serial), rack = "r" .. random(nracks), threads = random(4) }
end

-- Lags the members report against res: actives 0, standbys 0..1000; `stale` drops some
-- reports (a death: the last heartbeats did not arrive) and adds old state elsewhere.
local function report(members, T, res, stale)
  local lags = {}
  for t = 0, T - 1 do
    if random() < 0.7 then lags[#lags + 1] = { t, res.active[t], 0 } end
    for _, s in ipairs(res.standby[t]) do
      if not stale or random() < 0.7 then lags[#lags + 1] = { t, s, random(0, 1000) } end
    end
    if stale and random() < 0.1 then
      lags[#lags + 1] = { t, members[random(#members)].id, random(1000, 100000) }
    end
  end
  return lags
end

local function shuffled(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  for i = #out, 2, -1 do
    local j = random(i)
    out[i], out[j] = out[j], out[i]
  end
  return out
end

local function remove_random(members)
  local out, gone = {}, random(#members)
  for i, m in ipairs(members) do
    if i ~= gone then out[#out + 1] = m end
  end
  return out
end

describe("the assignor", function()
  it("keeps its guarantees over 1,000 random clusters and their churn", function()
    math.randomseed(6)
    local events = { join = 0, leave = 0, death = 0, resize = 0 }
    for _ = 1, 1000 do
      local nracks, n, T, K = random(5), random(50), random(500), random(0, 2)
      local members = {}
      for i = 1, n do members[i] = new_member(nracks) end
      local res = assert(run(members, T, K))
      check(members, T, K, nil, {}, res)

      -- Determinism: the same input twice, and the members in another order.
      assert(same(res, assert(run(members, T, K)), T))
      assert(same(res, assert(run(shuffled(members), T, K)), T))

      for _ = 1, random(2, 4) do
        local ev = ({ "join", "leave", "death", "resize" })[random(4)]
        if #members == 1 and ev ~= "join" then ev = "join" end
        events[ev] = events[ev] + 1
        local lags = report(members, T, res, ev == "death")
        if ev == "join" then
          members[#members + 1] = new_member(nracks)
        elseif ev == "resize" then
          local m = members[random(#members)]
          members = shuffled(members)
          m.threads = random(4)
        else
          members = remove_random(members)
        end
        local nxt = assert(run(members, T, K, res, lags))
        check(members, T, K, res, lags, nxt)
        if random() < 0.2 then
          assert(same(nxt, assert(run(shuffled(members), T, K, res, lags)), T))
        end
        res = nxt
      end
    end
    for ev, count in pairs(events) do assert(count > 100, ev) end
    -- Orphans with a replica somewhere mostly land on their lowest-lag one: the others found
    -- it full (the least movement comes first); the figures are in docs/assignment.md.
    assert(tally.promoted >= 0.75 * tally.orphans_with_state,
           ("%d of %d orphans promoted"):format(tally.promoted, tally.orphans_with_state))
    assert(tally.k1_feasible > 500)
  end)

  it("promotes the caught-up standby in another rack when an active dies", function()
    local members = {
      { id = "a1", rack = "a", threads = 1 }, { id = "b1", rack = "b", threads = 1 },
      { id = "c1", rack = "c", threads = 1 }, { id = "a2", rack = "a", threads = 1 },
      { id = "b2", rack = "b", threads = 1 }, { id = "c2", rack = "c", threads = 1 },
    }
    local T, K = 12, 2
    local res = assert(run(members, T, K))
    local victim = res.active[0]
    local lags = report(members, T, res, false)
    -- One standby of task 0 far behind, the other close.
    local far, close = res.standby[0][1], res.standby[0][2]
    for _, l in ipairs(lags) do
      if l[1] == 0 and l[2] == far then l[3] = 50000 end
      if l[1] == 0 and l[2] == close then l[3] = 3 end
    end
    local left = {}
    for _, m in ipairs(members) do if m.id ~= victim then left[#left + 1] = m end end
    local nxt = assert(run(left, T, K, res, lags))
    assert.equal(close, nxt.active[0])
    local rack = {}
    for _, m in ipairs(members) do rack[m.id] = m.rack end
    assert.are_not.equal(rack[victim], rack[close])
    check(left, T, K, res, lags, nxt)
    -- Every task of the dead member went to one of its standbys.
    for t = 0, T - 1 do
      if res.active[t] == victim then
        local was = {}
        for _, s in ipairs(res.standby[t]) do was[s] = true end
        assert(was[nxt.active[t]], "task " .. t .. " did not go to a standby")
      end
    end
  end)

  describe("with warm-up (KIP-441)", function()
    local members = {
      { id = "na", rack = "a", threads = 1 }, { id = "nb", rack = "b", threads = 1 },
      { id = "nc", rack = "c", threads = 1 },
    }
    local rack = { na = "a", nb = "b", nc = "c", nd = "d" }
    local T, K, ACC = 12, 1, 100

    -- every replica caught up (lag 0)
    local function caught_up(res)
      local lags = {}
      for t = 0, T - 1 do
        lags[#lags + 1] = { t, res.active[t], 0 }
        for _, sb in ipairs(res.standby[t]) do lags[#lags + 1] = { t, sb, 0 } end
      end
      return lags
    end

    local function rules(res)
      for t = 0, T - 1 do
        local sb = res.standby[t][1]
        assert.are_not.equal(res.active[t], sb, "node rule, task " .. t)
        assert.are_not.equal(rack[res.active[t]], rack[sb], "rack rule, task " .. t)
      end
    end

    it("gives every task of a dead node to its caught-up standby, balance or not", function()
      for seed = 1, 20 do
        math.randomseed(seed)
        local first = assert(run(shuffled(members), T, K, nil, nil, ACC))
        local lags = caught_up(first)
        local victim = members[random(3)].id
        local left = {}
        for _, m in ipairs(members) do if m.id ~= victim then left[#left + 1] = m end end
        local nxt = assert(run(left, T, K, first, lags, ACC))
        for t = 0, T - 1 do
          if first.active[t] == victim then
            assert.equal(first.standby[t][1], nxt.active[t], "task " .. t)
          else
            assert.equal(first.active[t], nxt.active[t], "task " .. t .. " moved")
          end
        end
        rules(nxt)
      end
    end)

    it("makes no task active on a joining node before its replica caught up", function()
      local first = assert(run(members, T, K, nil, nil, ACC))
      local lags = caught_up(first)
      -- (in a rack of its own: a warm-up replica takes a standby slot, under the rack rule)
      local four = { members[1], members[2], members[3], { id = "nd", rack = "d", threads = 1 } }
      local warm = assert(run(four, T, K, first, lags, ACC))
      local on_d, warming = 0, {}
      for t = 0, T - 1 do
        assert.equal(first.active[t], warm.active[t], "task " .. t .. " moved before warm-up")
        if warm.standby[t][1] == "nd" then warming[#warming + 1] = t end
        if warm.active[t] == "nd" then on_d = on_d + 1 end
      end
      assert.equal(0, on_d)
      assert.equal(3, warm.warmups) -- the tasks balance gives nd: 12 / 4
      assert.is_true(#warming >= 3)
      rules(warm)
      -- halfway: still behind, nothing moves
      local behind = caught_up(warm)
      for _, l in ipairs(behind) do if l[2] == "nd" then l[3] = ACC + 1 end end
      local still = assert(run(four, T, K, warm, behind, ACC))
      for t = 0, T - 1 do assert.equal(warm.active[t], still.active[t]) end
      -- caught up: the tasks move, and balance holds again
      local caught = caught_up(warm)
      local moved = assert(run(four, T, K, warm, caught, ACC))
      local count = {}
      for t = 0, T - 1 do count[moved.active[t]] = (count[moved.active[t]] or 0) + 1 end
      for _, m in ipairs(four) do assert.equal(3, count[m.id], m.id) end
      assert.equal(0, moved.warmups)
      rules(moved)
    end)
  end)

  it("moves nothing when nothing changed", function()
    math.randomseed(7)
    for _ = 1, 50 do
      local members = {}
      for i = 1, random(40) do members[i] = new_member(random(4)) end
      local T, K = random(300), random(0, 2)
      local res = assert(run(members, T, K))
      local nxt = assert(run(members, T, K, res, report(members, T, res, false)))
      assert(same(res, nxt, T))
      assert.equal(0, nxt.moved)
    end
  end)

  it("gives each thread floor or ceil of the tasks when a big node joins", function()
    local members = {}
    for i = 1, 4 do members[i] = { id = "n" .. i, rack = "r" .. i, threads = 1 } end
    local T = 40
    local res = assert(run(members, T, 1))
    local lags = report(members, T, res, false)
    members[5] = { id = "n5", rack = "r5", threads = 4 }
    local nxt = assert(run(members, T, 1, res, lags))
    check(members, T, 1, res, lags, nxt)
    local count = 0
    for t = 0, T - 1 do if nxt.active[t] == "n5" then count = count + 1 end end
    assert.equal(20, count) -- 8 threads, 5 tasks each
    assert.equal(20, nxt.moved)
  end)

  it("places fewer standbys when members are too few, never two on a node", function()
    local res = assert(run({ { id = "x", rack = "r", threads = 2 },
                             { id = "y", rack = "r", threads = 1 } }, 9, 2))
    assert.equal(1, res.k)
    for t = 0, 8 do assert.are_not.equal(res.active[t], res.standby[t][1]) end
    local solo = assert(run({ { id = "x", rack = "r", threads = 2 } }, 5, 2))
    assert.equal(0, solo.k)
    local none = assert(run({ { id = "x", rack = "r", threads = 1 } }, 0, 1))
    assert.same({}, none.active)
  end)

  it("gives no standby to a task that holds no state, and spreads the others' evenly", function()
    local members = { { id = "a1", rack = "a", threads = 1 }, { id = "b1", rack = "b", threads = 1 },
                      { id = "c1", rack = "c", threads = 1 } }
    local bare = {}
    for t = 0, 5 do bare[t] = true end -- tasks 0..5 stateless, 6..11 hold state
    local res = assert(run(members, 12, 1, nil, nil, nil, bare))
    local per = {}
    for t = 0, 11 do
      if bare[t] then
        assert.same({}, res.standby[t], "task " .. t)
      else
        assert.equal(1, #res.standby[t], "task " .. t)
        assert.are_not.equal(res.active[t], res.standby[t][1])
        per[res.standby[t][1]] = (per[res.standby[t][1]] or 0) + 1
      end
    end
    assert.same({ a1 = 2, b1 = 2, c1 = 2 }, per) -- 6 standbys over 3 members
    -- a previous standby of such a task is dropped, and a move of it is never held for a
    -- warm-up: no replica of it holds anything to warm up
    local solo = { { id = "a1", rack = "a", threads = 1 } }
    local all_bare = { [0] = true, [1] = true, [2] = true, [3] = true }
    local first = assert(run(solo, 4, 1, nil, nil, nil, all_bare))
    local lags = {}
    for t = 0, 3 do lags[#lags + 1] = { t, "a1", 0 } end
    local prev = { active = first.active, standby = { [0] = { "b1" }, {}, {}, {} } }
    local two = { solo[1], { id = "b1", rack = "b", threads = 1 } }
    local next = assert(run(two, 4, 1, prev, lags, 100, all_bare))
    assert.equal(0, next.warmups)
    local on_b = 0
    for t = 0, 3 do
      assert.same({}, next.standby[t], "task " .. t)
      on_b = on_b + (next.active[t] == "b1" and 1 or 0)
    end
    assert.equal(2, on_b)
    -- the same tasks holding state: b1 warms 2 of them up instead
    local held = assert(run(two, 4, 1, prev, lags, 100))
    assert.equal(2, held.warmups)
  end)

  it("refuses invalid input", function()
    local _, err = run({}, 3, 1)
    assert.matches("no member", err)
    _, err = run({ { id = "x", rack = "r", threads = 1 },
                   { id = "x", rack = "s", threads = 1 } }, 3, 1)
    assert.matches("twice", err)
    _, err = run({ { id = "x", rack = "r", threads = 0 } }, 3, 1)
    assert.matches("threads", err)
    local b = ffi.gc(C.bk_ffi_assign_new(2, 1), C.bk_ffi_assign_free)
    C.bk_ffi_assign_add_member(b, "x", nil, nil, 1)
    ibuf[0] = 5
    assert.equal(0, C.bk_ffi_assign_set_prev(b, 0, 0, ibuf, 1))
    assert.equal(-1, C.bk_ffi_assign_compute(b))
    assert.matches("out of range", ffi.string(C.bk_ffi_assign_error(b)))
    assert.equal(-1, C.bk_ffi_assign_set_prev(b, 2, 0, ibuf, 0))
    b = ffi.gc(C.bk_ffi_assign_new(2, 1), C.bk_ffi_assign_free)
    C.bk_ffi_assign_add_member(b, "x", nil, nil, 1)
    C.bk_ffi_assign_add_lag(b, 0, 0, -4)
    assert.equal(-1, C.bk_ffi_assign_compute(b))
    assert.matches("invalid", ffi.string(C.bk_ffi_assign_error(b)))
  end)
end)
