-- Chaos (scripts/chaos, spec/fixtures/chaos.lua): three nodes with standbys count keyed input
-- while faults come every 2 to 4 s, then an oracle reads the whole output: nothing lost,
-- nothing counted twice, no output of a key never sent, every key's counts in order, and no
-- record left in a generation's repartition topic that no task read.
--   CHAOS_FAULTS=all (the default; make test's profile): every fault in one run
--     (chaos.combined): SIGKILLs, double SIGKILLs, nodes frozen past their session
--     (zombies), short freezes, SIGTERM restarts, a broker killed and restarted, and an
--     online repartition, on 3 brokers; at exactly-once unless CHAOS_GUARANTEE says
--     otherwise, from generation 0 or with the count's own task count (CHAOS_TASKS=N;
--     make test: 4).
--   CHAOS_FAULTS=nodes: the nodes' faults only (chaos.run), at-least-once by default.
-- CHAOS_SECONDS (75), CHAOS_SEED replays a run's choices, CHAOS_SEEDS=N runs N seeds one
-- after the other (each prints its line), CHAOS_GUARANTEE=exactly_once|at_least_once,
-- CHAOS_PAUSE_MAX_MS (nodes profile: 1500; its session is 2000), CHAOS_PLAN=move,kill,...
-- (the combined profile with these steps alone, to narrow a failure down).
-- make test runs the combined profile for 75 s on real Kafka; scripts/chaos runs any of them
-- on either broker (CHAOS_BROKER=dev|kafka).
local helpers = require "spec.helpers"
local chaos = require "spec.fixtures.chaos"

local seconds = tonumber(os.getenv("CHAOS_SECONDS") or "") or 75
local faults = os.getenv("CHAOS_FAULTS") or "all"
local guarantee = os.getenv("CHAOS_GUARANTEE") or (faults == "all" and "exactly_once" or
                                                    "at_least_once")
local eos = guarantee == "exactly_once"
local seeds = tonumber(os.getenv("CHAOS_SEEDS") or "") or 1
local first_seed = tonumber(os.getenv("CHAOS_SEED") or "") or os.time()
local plan_given = os.getenv("CHAOS_PLAN") ~= nil
local tasks = tonumber(os.getenv("CHAOS_TASKS") or "4")
if tasks == 0 then tasks = nil end -- from generation 0

describe("chaos", function()
  after_each(helpers.cleanup)

  if not helpers.real_kafka() and not os.getenv("CHAOS_SECONDS") then
    it("runs on real Kafka in make test", function()
      pending("on the dev broker: CHAOS_BROKER=dev scripts/chaos")
    end)
    return
  end

  for i = 1, seeds do
    local seed = first_seed + i - 1
    local what = faults == "all" and
                   "loses nothing, counts nothing twice and leaves nothing unread under every " ..
                   "fault at once, with a repartition" or
                   "loses nothing and counts nothing twice while nodes are killed, frozen and " ..
                   "restarted"
    it(what .. (seeds > 1 and (" (seed " .. seed .. ")") or ""), function()
      helpers.with_timeout(seconds + 600, function()
        local r
        if faults == "all" then
          local plan
          if os.getenv("CHAOS_PLAN") then
            plan = {}
            for step in os.getenv("CHAOS_PLAN"):gmatch("[^,]+") do plan[#plan + 1] = step end
          end
          r = chaos.combined { seconds = seconds, seed = seed, exactly_once = eos, tasks = tasks,
                               plan = plan }
        else
          r = chaos.run { seconds = seconds, seed = seed, exactly_once = eos,
                          pause_max_ms = tonumber(os.getenv("CHAOS_PAUSE_MAX_MS") or "") }
        end
        print("\n  " .. r.line)
        if r.late_s and r.late_s > 0 then
          -- outputs that came late are said, with where they were, not hidden
          print("  " .. table.concat(r.bad, "\n  ", 1, math.min(#r.bad, 3)))
        end
        for _, k in ipairs { "lost", "over", "extra", "order", "dup", "inexact", "unread" } do
          if r[k] then print(string.format("chaos.%s %d", k, r[k])) end
        end
        local ok = r.lost == 0 and r.over == 0 and r.extra == 0 and r.order == 0 and
                   (r.unread or 0) == 0 and (r.move_status == nil or r.move_status == 0) and
                   (not eos or (r.dup == 0 and r.inexact == 0))
        if not ok then
          -- what the nodes said that was wrong: the first ERROR lines of each (its last run)
          for id, node in pairs(r.nodes) do
            local n = 0
            for line in node:log():gmatch("[^\n]+") do
              if line:find(" ERROR ", 1, true) and n < 8 then
                n = n + 1
                r.bad[#r.bad + 1] = id .. ": " .. line
              end
            end
          end
        end
        assert(ok, r.line .. "\n" .. table.concat(r.bad, "\n", 1, math.min(#r.bad, 50)))
        if faults == "all" and not plan_given then
          local n = r.counts
          assert(n.kill >= 2 and n.double >= 2 and n.zombie >= 2 and n.broker >= 1 and
                 n.move == 1, "the run lacks a fault it must have: " .. r.line)
        end
        for id, node in pairs(r.nodes) do
          local st, log = node:stop(), nil
          log = node:log()
          if st == 134 and log:find("rd_kafka_broker_destroy_final: Assertion", 1, true) and
             log:find("final commit: outputs flushed, stores synced", 1, true) then
            -- librdkafka 2.0.2's race in destroying a client (its issue 3608, open): an abort
            -- after everything was committed; said, not hidden
            print(string.format("\n  %s: librdkafka's destroy race (issue 3608) aborted it "
                                .. "after its final commit", id))
          else
            assert.equal(0, st, id .. " did not stop cleanly:\n" .. log:sub(-4000))
          end
        end
      end)
    end)
  end
end)
