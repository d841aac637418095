-- beck.internal.busted_output: busted's terminal report, then one closing
-- line of beck's own, "N passed, N failed, N skipped", counting every spec
-- (errors outside an `it`, such as a spec file that does not load, count as
-- failed). `beck test` selects it.
return function(options)
  local busted = require "busted"
  local term = require "term"
  local isatty = io.type(io.stdout) == "file" and term.isatty(io.stdout)
  local inner = require("busted.outputHandlers." .. (isatty and "utfTerminal" or "plainTerminal"))(options)
  local subscribe = inner.subscribe

  -- BECK_SPEC_TIMES=1 (scripts/test sets it): the slowest spec files' wall-clock seconds
  -- before the closing line, to keep `make test` within its budget
  local times, started = {}, {}
  local tests, test_started = {}, nil
  local function clock()
    local ok, ffi = pcall(require, "ffi")
    if ok and pcall(function() return ffi.C.bk_ffi_clock_ms end) then
      return tonumber(ffi.C.bk_ffi_clock_ms()) / 1000
    end
    return os.time()
  end

  inner.subscribe = function(handler, opts)
    subscribe(handler, opts)
    -- BECK_SPEC_NOW=FILE (scripts/test sets it): the spec running now, so that a run stopped
    -- for taking too long can say where it was
    local now_file = os.getenv("BECK_SPEC_NOW")
    if now_file then
      busted.subscribe({ "test", "start" }, function(element)
        local f = io.open(now_file, "w")
        if f then
          local file = element.trace and element.trace.short_src or "?"
          f:write(file, ": ", element.name or "?", " (since ", os.date("%H:%M:%S"), ")\n")
          f:close()
        end
        return nil, true
      end)
    end
    if os.getenv("BECK_SPEC_TIMES") then
      busted.subscribe({ "file", "start" }, function(file)
        started[file.name] = clock()
        return nil, true
      end)
      busted.subscribe({ "test", "start" }, function()
        test_started = clock()
        return nil, true
      end)
      busted.subscribe({ "test", "end" }, function(element)
        if test_started then
          local file = element.trace and element.trace.short_src or "?"
          tests[#tests + 1] = { file:match("[^/]+$") .. ": " .. (element.name or "?"),
                                clock() - test_started }
          test_started = nil
        end
        return nil, true
      end)
      busted.subscribe({ "file", "end" }, function(file)
        if started[file.name] then
          times[#times + 1] = { file.name, clock() - started[file.name] }
        end
        return nil, true
      end)
    end
    busted.subscribe({ "suite", "end" }, function()
      if #times > 0 then
        table.sort(times, function(a, b) return a[2] > b[2] end)
        io.write("slowest spec files (s):")
        for i = 1, math.min(12, #times) do
          io.write(string.format(" %s %.1f", times[i][1]:match("[^/]+$"), times[i][2]))
        end
        io.write("\n")
        table.sort(tests, function(a, b) return a[2] > b[2] end)
        io.write("slowest specs (s):\n")
        for i = 1, math.min(15, #tests) do
          io.write(string.format("  %5.1f %s\n", tests[i][2], tests[i][1]))
        end
      end
      io.write(string.format("%d passed, %d failed, %d skipped\n", inner.successesCount,
                             inner.failuresCount + inner.errorsCount, inner.pendingsCount))
      io.flush()
      return nil, true
    end)
  end
  return inner
end
