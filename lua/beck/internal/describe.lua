-- beck.internal.describe: the text of `beck describe TOPOLOGY.lua`: the
-- subtopologies of an app with their processors, stores and topics, as
-- the runtime will run them.
local app_mod = require "beck.app"

local M = {}

function M.text(app)
  local plan = app:describe()
  local out = {}
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  add("app %s", plan.id)
  for _, sub in ipairs(plan.subtopologies) do
    add("  subtopology %d", sub.index - 1)
    for _, node in ipairs(app.order) do
      if node.sub == sub then
        if node.kind == "source" then
          add("    source %s <- %s%s", node.name, table.concat(node.topics, ", "),
              node.internal and " (internal)" or "")
        elseif node.kind == "sink" then
          add("    sink %s -> %s", node.name, node.topic)
        else
          add("    processor %s%s", node.name,
              node.stores and (" [stores: " .. table.concat(node.stores, ", ") .. "]") or "")
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
