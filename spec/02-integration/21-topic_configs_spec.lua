-- The topics beck creates on a real Apache Kafka carry the configs docs/kafka.md lists, read
-- back with DescribeConfigs by the outside client; and topics someone else made with configs
-- that lose state draw a warning that says what would be lost.
-- Real Kafka only: the dev broker has no topic configs (docs/dev-broker.md).
local helpers = require "spec.helpers"
local cluster = require "spec.fixtures.cluster"

local DAY_MS = 24 * 3600 * 1000

describe("topic configs on a real Kafka", function()
  after_each(helpers.cleanup)

  if not helpers.real_kafka() then
    it("are a real broker's", function()
      pending("needs BECK_SPEC_BACKEND=kafka: the dev broker has no topic configs")
    end)
    return
  end

  it("are what beck asks for: changelogs compact or compact,delete, the control topic kept",
     function()
    helpers.with_timeout(120, function()
      local kafka = helpers.kafka { topics = { "pageviews:2", "text-lines:2" } }
      local bs = kafka.bootstrap
      local pv = helpers.start_node("scripts/examples/pageviews.lua", { "-b", bs })
      pv:wait_running(30)
      local wc = cluster.start_node(bs, "na", "a")
      wc:wait_running(30)

      -- a window store: its retention (tumbling 60 s + grace 10 s) and a day
      local win = helpers.configs(bs, "pageviews-views-per-minute-changelog")
      assert.equal("compact,delete", win["cleanup.policy"])
      assert.equal(tostring(60000 + 10000 + DAY_MS), win["retention.ms"])
      -- a key-value store
      assert.equal("compact", helpers.configs(bs, "wordcount-counts-changelog")["cleanup.policy"])
      -- the control topic keeps a week (members start from its latest checkpoint), stamped
      -- by the broker
      local ctl = helpers.configs(bs, "wordcount-control")
      assert.equal("delete", ctl["cleanup.policy"])
      assert.equal("604800000", ctl["retention.ms"])
      assert.equal("-1", ctl["retention.bytes"])
      assert.equal("LogAppendTime", ctl["message.timestamp.type"])
      -- outputs and repartition topics: the broker's defaults
      assert.equal("delete", helpers.configs(bs, "word-counts")["cleanup.policy"])
      assert.equal("delete",
                   helpers.configs(bs, "pageviews-views-per-minute-repartition")["cleanup.policy"])
      for _, n in ipairs { pv, wc } do
        assert.equal(0, n:stop())
        assert.not_matches("WARN[^\n]*configs", n:log())
      end
    end)
  end)

  it("are checked when someone else made the topics: configs that lose state are named",
     function()
    helpers.with_timeout(120, function()
      local kafka = helpers.kafka { topics = { "text-lines:2" } }
      local bs = kafka.bootstrap
      assert(kafka:create_topic("wordcount-counts-changelog", 2,
                                { ["cleanup.policy"] = "delete", ["retention.ms"] = 3600000 }))
      assert(kafka:create_topic("wordcount-control", 1, { ["retention.ms"] = 600000 }))
      local wc = cluster.start_node(bs, "na", "a")
      wc:wait_running(30)
      local log = wc:log()
      assert.matches("changelog wordcount%-counts%-changelog of store counts has " ..
                     "cleanup.policy=delete: a replica restoring it misses every key not " ..
                     "written within retention.ms=3600000", log)
      assert.matches("control topic wordcount%-control has retention.ms=600000, beck " ..
                     "wants at least 3600000: a member starts from the latest checkpoint", log)
      assert.matches("control topic wordcount%-control has message.timestamp.type=CreateTime",
                     log)
      -- a warning, not a stop: the node runs
      assert.is_true(wc:alive())
      assert.equal(0, wc:stop())
    end)
  end)
end)
