-- Warm-up (KIP-441; assign.h `warmup`, member.c's probing rebalance): with
-- standbys on, a node that joins an app whose tasks hold big stores does not
-- take its share of actives at once. Each task that balance sends its way
-- stays active where its state is, and the joiner gets a standby of it to
-- warm up in; the leader looks again every --probing-rebalance-interval-ms and
-- moves a task once the joiner's replica is at most --acceptable-recovery-lag
-- records behind. So the joiner's restore of a moved task replays about that
-- lag, not the changelog, and balance is back once every replica caught up.
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local ACCEPTABLE_LAG = 200
-- What a moved task's restore may replay beyond the acceptable lag: the
-- records written between the standby's last lag report (once a second) and
-- the handoff, at the rate the input flows below (~40 changelog records a
-- second per task).
local MARGIN = 300

-- Lines keyed by bucket (counts exact), bucket b written to partition b, so
-- that every task's store and changelog grow alike.
local function make_lines(from, to, exact) return cluster.bucket_lines(from, to, exact, true) end

local committed_total, latest = cluster.committed_total, cluster.latest
local epochs, now_of, settled = cluster.epochs, cluster.now_of, cluster.settled

local function node(bs, id, rack)
  return cluster.start_node(bs, id, rack, cluster.STANDBY, {
    "--acceptable-recovery-lag", tostring(ACCEPTABLE_LAG),
    "--probing-rebalance-interval-ms", "1000",
    -- every update reaches the changelog (no write-back cache folding a
    -- commit interval's updates of a word into one), so the changelogs are
    -- long and their lengths follow from the input
    "--cache-max-bytes", "0" })
end

describe("warm-up", function()
  after_each(helpers.cleanup)
  local promotions -- what the first test saw, for the second

  it("keeps a joiner's tasks where they are until its standbys caught up, then moves them, "
     .. "replaying only the acceptable lag", function()
    local broker = helpers.start_broker { topics = { "text-lines:12" } }
    local bs = broker.bootstrap
    local exact = {}
    local nodes = { na = node(bs, "na", "a"), nb = node(bs, "nb", "b") }
    helpers.eventually(function() return settled(nodes, 6) end, 40, 0.2)

    -- a sizeable store: 30,000 lines are 10,000 changelog updates per task
    local produced = 30000
    helpers.produce(bs, "text-lines", make_lines(1, produced, exact), { timeout = 60 })
    helpers.eventually(function() return committed_total(bs) == produced end, 60, 0.3)

    -- a third node joins while input keeps flowing: 60 lines (20 updates a
    -- task) about every half second, until it runs its share of actives
    local t_join = helpers.now()
    nodes.nc = node(bs, "nc", "c")
    local balanced_after
    while true do
      helpers.produce(bs, "text-lines", make_lines(produced + 1, produced + 60, exact))
      produced = produced + 60
      if settled(nodes, 4) then
        balanced_after = helpers.now() - t_join
        break
      end
      assert(helpers.now() - t_join < 50, "no balance 50 s after the join: nc runs "
             .. #now_of(nodes.nc).running .. " active(s)")
      helpers.sleep(0.3)
    end
    helpers.eventually(function() return committed_total(bs) == produced end, 60, 0.3)

    -- (a) nc ran no task as active before it had held it as a standby in an
    -- earlier epoch, and the first epoch that gave it anything gave it
    -- standbys only
    local history = epochs(nodes.nc)
    local first
    for _, e in ipairs(history) do
      if #e.running > 0 or #e.standby > 0 then first = first or e end
    end
    assert.is_not_nil(first, "nc applied no epoch with tasks")
    assert.equal(0, #first.running, "actives of nc in epoch " .. first.epoch)
    assert.is_true(#first.standby >= 4, "standbys of nc in epoch " .. first.epoch)
    local held_before = {}
    for _, e in ipairs(history) do
      for _, t in ipairs(e.running) do
        assert.is_truthy(held_before[t] and held_before[t] < e.epoch,
                         "nc runs " .. t .. " in epoch " .. e.epoch
                         .. " without an earlier standby of it")
      end
      for _, t in ipairs(e.standby) do held_before[t] = held_before[t] or e.epoch end
    end

    -- (b) each task nc runs started from its warm standby's state: its
    -- restore replayed at most the acceptable lag (and what came in since
    -- the last lag report), far less than its changelog holds
    local log = nodes.nc:log()
    local moved = now_of(nodes.nc).running
    local replayed, held, unlogged = 0, 0, {}
    for _, t in ipairs(moved) do
      if not log:match("task " .. t .. ": promoted from standby") then
        unlogged[#unlogged + 1] = t
      end
      local n, m = log:match("restore: task " .. t .. " store counts: replaying (%d+) "
                             .. "record%(s%) of [^\n]* %(the changelog holds (%d+)%)")
      assert.is_not_nil(n, "restore line of " .. t .. " on nc")
      n, m = tonumber(n), tonumber(m)
      assert.is_true(m >= 10000, t .. ": the changelog holds " .. m)
      assert.is_true(n <= ACCEPTABLE_LAG + MARGIN and n * 10 < m,
                     t .. " replayed " .. n .. " of " .. m .. " record(s)")
      replayed, held = replayed + n, held + m
    end

    -- (c) balance is back: 4 actives and 4 standbys on each node, in one epoch
    assert.is_true(settled(nodes, 4))
    local warmups = 0
    for _, n in pairs(nodes) do
      for w in n:log():gmatch("leading: epoch %d+ for 3 members[^\n]-(%d+) warming up") do
        warmups = math.max(warmups, tonumber(w))
      end
    end
    assert.is_true(warmups >= 1, "the leader held no task back")
    print(string.format("\n  %d task(s) moved to the joiner after warming up (at most %d held "
                        .. "back at once), balanced %.1f s after the join; replayed %d "
                        .. "changelog record(s) of %d held", #moved, warmups, balanced_after,
                        replayed, held))

    -- (d) counts exact
    local kv = latest(helpers.consume(bs, "word-counts", { timeout = 60 }))
    for w, n in pairs(exact) do assert.equal(n, kv[w], "count of " .. w) end
    for _, n in pairs(nodes) do assert.equal(0, n:stop()) end
    promotions = { moved = moved, unlogged = unlogged }
  end)

  -- A warmed-up task that the joiner starts is a promotion: its log says so and on_promote
  -- runs, as after a failover (spec 10), although the view that starts it comes after the
  -- one that dropped its standby (runtime/cluster/reconcile.c keeps was_standby across
  -- them; spec/01-unit/33-reconcile_spec.lua has the case on its own).
  it("logs the promotion of every warmed-up task it moved", function()
    assert.is_not_nil(promotions, "the test above did not get as far as the moves")
    assert.is_true(#promotions.moved >= 1)
    assert.same({}, promotions.unlogged)
  end)
end)
