-- beck: the module a topology requires. `beck.app{ id = ... }` starts one.
local app = require "beck.app"
local dsl = require "beck.dsl"

local M = {}

M.version = "0.1.0"

-- The DSL (docs/dsl.md): windows, serdes, counters.
M.dsl = dsl

-- Declares an application. `config` holds its id and beck settings
-- (docs/settings.md); it returns the builder of beck.app, with the DSL's
-- app:stream and app:table.
function M.app(config)
  if type(config) ~= "table" then
    error("beck.app: expected a table like { id = \"my-app\" }", 2)
  end
  return dsl.attach(app.new(config, 3))
end

return M
