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

  inner.subscribe = function(handler, opts)
    subscribe(handler, opts)
    busted.subscribe({ "suite", "end" }, function()
      io.write(string.format("%d passed, %d failed, %d skipped\n", inner.successesCount,
                             inner.failuresCount + inner.errorsCount, inner.pendingsCount))
      io.flush()
      return nil, true
    end)
  end
  return inner
end
