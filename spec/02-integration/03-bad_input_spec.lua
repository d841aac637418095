-- Bad topologies and bad records: what `beck run` says, what it commits, and
-- what each error policy (fail, skip, dlq) does with a record that raises.
local helpers = require "spec.helpers"

local BECK = helpers.beck_bin()

-- The line of a fixture that holds `marker` (a comment), so that a spec does
-- not break when a fixture gains a line.
local line_of = require("spec.helpers").line_of

local function escape(s)
  return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0"))
end

local function values_of(list)
  local out = {}
  for i, r in ipairs(list) do out[i] = r.value end
  return out
end

local function sorted(t)
  table.sort(t)
  return t
end

describe("beck run with a bad topology", function()
  after_each(helpers.cleanup)

  -- Each fails while loading, before any broker is contacted.
  local function run_fixture(name)
    local start = helpers.now()
    local st, out, err = helpers.run({ BECK, "run", "spec/fixtures/" .. name .. ".lua" },
                                     { timeout = 10 })
    assert.is_true(helpers.now() - start < 5, "took " .. (helpers.now() - start) .. " s")
    assert.are_not.equal(0, st)
    assert.not_matches("dev broker:", out)
    return err
  end

  it("exits non-zero quickly on a syntax error, naming the file and line", function()
    local err = run_fixture("syntax_error")
    local line = line_of("spec/fixtures/syntax_error.lua", "SYNTAX")
    assert.matches("spec/fixtures/syntax_error%.lua:" .. line .. ":", err)
  end)

  it("names the file and line of a declaration that raises", function()
    local err = run_fixture("load_error")
    local line = line_of("spec/fixtures/load_error.lua", "LOAD")
    assert.matches("spec/fixtures/load_error%.lua:" .. line .. ": processor 'p': unknown " ..
                   "parent 'nope'", err)
  end)

  it("refuses an unknown setting in beck.app{}", function()
    local err = run_fixture("unknown_setting")
    assert.matches("spec/fixtures/unknown_setting%.lua: .*unknown setting 'on_eror'", err)
  end)

  it("refuses a topology that does not return its app", function()
    local err = run_fixture("no_return")
    assert.matches("spec/fixtures/no_return%.lua: .*return app", err)
  end)

  it("names a topology file that does not exist", function()
    local err = run_fixture("does_not_exist")
    assert.matches("spec/fixtures/does_not_exist%.lua", err)
  end)

  it("refuses an unknown error policy on the command line", function()
    local st, _, err = helpers.run({ BECK, "run", "spec/fixtures/boom.lua", "--on-error",
                                     "ignore" }, { timeout = 10 })
    assert.equal(2, st)
    assert.matches("on_error", err)
  end)
end)

describe("a record that a processor fails on", function()
  after_each(helpers.cleanup)

  -- A one-partition topic, so "the records before" is one sequence.
  local function setup_single(topic, values)
    local broker = helpers.start_broker {}
    assert.is_true(broker:create_topic(topic, 1))
    local records = {}
    for i, v in ipairs(values) do records[i] = { key = "k" .. i, value = v } end
    helpers.produce(broker.bootstrap, topic, records)
    return broker
  end

  -- Under the default policy (fail) the bad record's task stops at it: everything before it
  -- is out and committed, nothing after, and the node keeps running (its other tasks would go
  -- on). The error names `beck skip`, which lists the record; the task then goes on by itself
  -- from its last commit, skips that record and nothing else.
  local function fail_then_resume(opts)
    helpers.with_timeout(60, function()
      local values = {}
      for i = 0, 9 do values[#values + 1] = opts.good(i) end
      values[opts.bad_offset + 1] = opts.bad_value
      local broker = setup_single(opts.input, values)
      local bs = broker.bootstrap

      local node = helpers.start_node(opts.fixture, { "-b", bs })
      local where = string.format("process failed on record %s/0/%d: %s:%d: %s", opts.input,
                                  opts.bad_offset, opts.fixture,
                                  line_of(opts.fixture, opts.marker), opts.message)
      -- (log text: the message is the feature, what an operator or a user reads)
      node:wait_log(escape(where), 20)
      local command = string.format("beck skip -b %s --app %s --topic %s --partition 0 " ..
                                    "--offset %d", bs, opts.group, opts.input, opts.bad_offset)
      assert.matches(escape(command), node:log())

      -- what came before the bad record is out and committed; nothing after
      local before = {}
      for i = 0, opts.bad_offset - 1 do before[#before + 1] = opts.transform(values[i + 1]) end
      helpers.eventually(function()
        return (helpers.committed(bs, opts.input, opts.group)[0] or 0) == opts.bad_offset
      end, 20, 0.2)
      assert.same(before, values_of(helpers.consume(bs, opts.output)))
      helpers.sleep(1)
      assert.is_true(node:alive(), node:log())
      assert.same({ [0] = opts.bad_offset }, helpers.committed(bs, opts.input, opts.group))

      -- beck skip: the task goes on past that record, and only that one
      local st, out, err = helpers.run({ BECK, "skip", "-b", bs, "--app", opts.group, "--topic",
                                         opts.input, "--partition", "0", "--offset",
                                         tostring(opts.bad_offset) }, { timeout = 60 })
      assert.equal(0, st, err)
      assert.matches(escape(string.format("listed %s/0/%d in %s-skips", opts.input,
                                          opts.bad_offset, opts.group)), out)
      -- (log text: the message is the feature, what an operator or a user reads)
      node:wait_log(escape(string.format("record %s/0/%d is listed by beck skip", opts.input,
                                         opts.bad_offset)), 20)
      node:wait_log(escape(string.format("skipped record %s/0/%d, listed by beck skip",
                                         opts.input, opts.bad_offset)), 20)
      local good = {}
      for i, v in ipairs(values) do
        if i ~= opts.bad_offset + 1 then good[#good + 1] = opts.transform(v) end
      end
      helpers.eventually(function()
        return (helpers.committed(bs, opts.input, opts.group)[0] or 0) == 10
      end, 20, 0.2)
      assert.equal(0, node:stop())
      -- each good record exactly once, in order: nothing before the bad record was read twice
      assert.same(good, values_of(helpers.consume(bs, opts.output)))
      assert.matches("stopped: 10 in, 9 out, 1 skipped, 0 dead%-lettered", node:log())
    end)
  end

  it("forwarded to a child that does not exist: fail parks its task at it, beck skip goes on",
     function()
    fail_then_resume {
      fixture = "spec/fixtures/bad_forward.lua", marker = "FORWARD", group = "bad-forward",
      input = "fw-in", output = "fw-out",
      good = function(i) return "value " .. i end,
      transform = string.upper,
      bad_offset = 6, bad_value = "nope 6",
      message = "forward: processor 'route' has no child 'nope'",
    }
  end)

  it("raised: fail parks its task at it, commits nothing past it; beck skip goes on", function()
    fail_then_resume {
      fixture = "spec/fixtures/boom.lua", marker = "BOOM", group = "boom",
      input = "boom-in", output = "boom-out",
      good = function(i) return "fine " .. i end,
      transform = function(v) return v .. "!" end,
      bad_offset = 3, bad_value = "a boom here",
      message = "boom in a boom here",
    }
  end)

  -- Several partitions, several bad records, each with a header.
  local function setup_mixed()
    local broker = helpers.start_broker { brokers = 2 }
    assert.is_true(broker:create_topic("boom-in", 3))
    local records, good = {}, {}
    for i = 1, 60 do
      local v = i % 7 == 0 and ("boom " .. i) or ("ok " .. i)
      records[i] = { key = "k" .. (i % 5), value = v, partition = i % 3,
                     headers = { trace = "t" .. i } }
      if i % 7 ~= 0 then good[#good + 1] = v .. "!" end
    end
    helpers.produce(broker.bootstrap, "boom-in", records)
    -- where each record landed, as the outside client sees it
    local where = {}
    for _, r in ipairs(helpers.consume(broker.bootstrap, "boom-in")) do where[r.value] = r end
    return broker, good, where
  end

  it("with on_error=skip (from the environment), every good record arrives", function()
    helpers.with_timeout(40, function()
      local broker, good, where = setup_mixed()
      local bs = broker.bootstrap
      local node = helpers.start_node("spec/fixtures/boom.lua", { "-b", bs },
                                      { env = { BECK_ON_ERROR = "skip" } })
      helpers.eventually(function()
        assert(node:alive(), "node died:\n" .. node:log())
        return helpers.count(bs, "boom-out") >= #good
      end, 20, 0.2)
      local line = line_of("spec/fixtures/boom.lua", "BOOM")
      for i = 7, 60, 7 do
        local r = where["boom " .. i]
        -- (log text: the message is the feature, what an operator or a user reads)
        node:wait_log(escape(string.format("skipped record boom-in/%d/%d: " ..
                                           "spec/fixtures/boom.lua:%d: boom in boom %d",
                                           r.partition, r.offset, line, i)))
      end
      assert.equal(0, node:stop())
      assert.same(sorted(good), sorted(values_of(helpers.consume(bs, "boom-out"))))
      assert.matches("app boom stopped: 60 in, 52 out, 8 skipped, 0 dead%-lettered", node:log())
      assert.same({ [0] = 20, [1] = 20, [2] = 20 }, helpers.committed(bs, "boom-in", "boom"))
    end)
  end)

  it("with on_error=dlq, bad records go to <id>-dlq with where and why", function()
    helpers.with_timeout(40, function()
      local broker, good, where = setup_mixed()
      local bs = broker.bootstrap
      local node = helpers.start_node("spec/fixtures/boom.lua", { "-b", bs, "--on-error", "dlq" })
      helpers.eventually(function()
        assert(node:alive(), "node died:\n" .. node:log())
        return helpers.count(bs, "boom-out") >= #good and helpers.count(bs, "boom-dlq") >= 8
      end, 20, 0.2)
      assert.equal(0, node:stop())
      assert.same(sorted(good), sorted(values_of(helpers.consume(bs, "boom-out"))))

      local dlq = helpers.consume(bs, "boom-dlq")
      assert.equal(8, #dlq)
      local line = line_of("spec/fixtures/boom.lua", "BOOM")
      local seen = {}
      for _, d in ipairs(dlq) do
        local src = where[d.value]
        assert(src, "unexpected dead letter " .. tostring(d.value))
        assert(not seen[d.value], d.value .. " dead-lettered twice")
        seen[d.value] = true
        local i = tonumber(d.value:match("^boom (%d+)$"))
        assert.equal("k" .. (i % 5), d.key)
        assert.equal(src.key, d.key)
        assert.equal("spec/fixtures/boom.lua:" .. line .. ": boom in " .. d.value,
                     d.headers["beck.error"])
        assert.equal("boom-in", d.headers["beck.topic"])
        assert.equal(tostring(src.partition), d.headers["beck.partition"])
        assert.equal(tostring(src.offset), d.headers["beck.offset"])
        assert.equal("t" .. i, d.headers.trace) -- the original header is kept
      end
      assert.matches("app boom stopped: 60 in, 52 out, 0 skipped, 8 dead%-lettered", node:log())
      assert.same({ [0] = 20, [1] = 20, [2] = 20 }, helpers.committed(bs, "boom-in", "boom"))
    end)
  end)
end)
