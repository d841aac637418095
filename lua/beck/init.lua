-- beck: the module a topology requires. `beck.app{ id = ... }` starts one.
local app = require "beck.app"

local M = {}

M.version = "0.1.0"

-- Declares an application. `config` holds its id and beck settings
-- (docs/settings.md); it returns the builder of beck.app.
function M.app(config)
  if type(config) ~= "table" then
    error("beck.app: expected a table like { id = \"my-app\" }", 2)
  end
  return app.new(config, 3)
end

return M
