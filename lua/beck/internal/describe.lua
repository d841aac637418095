-- beck.internal.describe: the text of `beck describe TOPOLOGY.lua`: the
-- topics an app reads, writes and owns, then its subtopologies with their
-- processors (and, for nodes the DSL made, the operation and the line of
-- the topology that made it) and stores, as the runtime will run them.
local app_mod = require "beck.app"
local dsl = require "beck.dsl"

local M = {}

local function pad(s, n)
  return s .. string.rep(" ", n - #s + 2)
end

-- "(op, file:line)" of a node the DSL made; "" for the processor API's.
local function origin(app, name)
  local info = dsl.info(app, name)
  if not info then return "" end
  return string.format("  (%s, %s)", info.op, info.where)
end

local function topic_lines(app, plan, add)
  local rows = {}
  for _, t in ipairs(plan.topics) do
    local what
    if t.keygroups then
      what = string.format("subtopology %d's generation %d (internal, %d partitions by key " ..
                           "group)", plan.subtopologies[t.sub].of - 1, t.generation or 1,
                           t.partitions)
    elseif t.internal then
      what = "internal, " .. (t.partitions and (t.partitions .. " partitions")
                              or "partitions of the widest input")
      if t.name:match("%-repartition$") then what = "repartition topic (" .. what .. ")" end
    elseif t.source and t.sink then
      what = "read and written"
    elseif t.source then
      what = "input"
    else
      what = "output"
    end
    rows[#rows + 1] = { t.name, what }
  end
  for _, st in ipairs(plan.stores) do
    if st.logged then rows[#rows + 1] = { st.changelog, "changelog of store " .. st.name } end
  end
  for _, g in ipairs(plan.globals or {}) do
    rows[#rows + 1] = { g.topic, "global table " .. g.name .. " (every node reads all of it)" }
  end
  -- as the topology sets it (the command line or BECK_ON_ERROR may differ)
  if app.config.on_error == "dlq" then
    rows[#rows + 1] = { app.config.dlq_topic or (plan.id .. "-dlq"), "dead letters (on_error)" }
  end
  local w = 0
  for _, r in ipairs(rows) do w = math.max(w, #r[1]) end
  add("  topics")
  for _, r in ipairs(rows) do add("    %s%s", pad(r[1], w), r[2]) end
end

function M.text(app)
  local plan = app:describe()
  local out = {}
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  add("app %s", plan.id)
  topic_lines(app, plan, add)
  for _, sub in ipairs(plan.subtopologies) do
    if sub.passthrough then
      add("  subtopology %d (passthrough of subtopology %d's input: no processors)",
          sub.index - 1, sub.of - 1)
      for _, ti in ipairs(sub.topics) do
        local t = plan.topics[ti]
        add("    %s -> %s", t.name, plan.topics[t.pass_to].name)
      end
    elseif sub.generation and sub.of ~= sub.index then
      add("  subtopology %d (generation %d of subtopology %d: %d tasks, key groups by range)",
          sub.index - 1, sub.generation, sub.of - 1, sub.tasks)
    elseif sub.generation then
      add("  subtopology %d (%d tasks, generation %d: key groups by range)", sub.index - 1,
          sub.tasks, sub.generation)
    else
      add("  subtopology %d", sub.index - 1)
    end
    for _, node in ipairs(app.order) do
      if not sub.passthrough and node.sub == plan.subtopologies[sub.of or sub.index] then
        local o = origin(app, node.name)
        if node.kind == "source" then
          local read = {}
          for i, t in ipairs(node.topics) do read[i] = sub.gen_topic and sub.gen_topic[t] or t end
          add("    source %s <- %s%s%s", node.name, table.concat(read, ", "),
              node.internal and " (internal)" or "", o)
        elseif node.kind == "sink" then
          add("    sink %s -> %s%s", node.name, node.topic, o)
        else
          add("    processor %s%s%s", node.name,
              node.stores and (" [stores: " .. table.concat(node.stores, ", ") .. "]") or "", o)
        end
        if #node.children > 0 then
          add("      -> %s", table.concat(node.children, ", "))
        end
      end
    end
    for _, st in ipairs(plan.stores) do
      if st.sub == sub.index then
        add("    store %s (%s)", st.name, st.logged and ("changelog " .. st.changelog)
                                                    or "no changelog")
      end
    end
  end
  for _, g in ipairs(plan.globals or {}) do
    add("  global table %s <- %s (every node holds all of it; no changelog)", g.name, g.topic)
  end
  return table.concat(out, "\n") .. "\n"
end

-- Loads a topology file and returns its description.
function M.file(path)
  local chunk, err = loadfile(path)
  if not chunk then error(err, 0) end
  local app = chunk()
  if not app_mod.is_app(app) then
    error(path .. ": the topology must return its app (end the file with `return app`)", 0)
  end
  return M.text(app)
end

return M
