-- wordcount: the stateful example. Splits lines into words, counts each word
-- in the RocksDB store "counts" (changelogged to wordcount-counts-changelog)
-- and writes the new count of a word to word-counts, keyed by the word.
--
-- Words are counted by the task of the line's partition: write lines keyed
-- by their first word, or by anything, the count of a word is exact when
-- all its lines land in one partition. (The DSL's group_by repartitions by
-- word when they do not.)
local beck = require "beck"

local app = beck.app { id = "wordcount" }

app:source("lines", "text-lines")

app:processor("split", {
  process = function(ctx, _, line)
    if line == nil then return end
    for word in line:lower():gmatch("%a+") do
      ctx:forward(word, word)
    end
  end,
}, "lines")

app:processor("count", {
  init = function(ctx)
    ctx.counts = ctx:store("counts")
  end,
  process = function(ctx, word)
    local n = tonumber(ctx.counts:get(word) or "0") + 1
    ctx.counts:put(word, tostring(n))
    ctx:forward(word, tostring(n))
  end,
}, "split")

app:store("counts", "count")

app:sink("out", "word-counts", "count")

app:hook("on_restore", function(p)
  if p.done and p.kind == "bootstrap" then
    io.stderr:write(string.format("wordcount: bootstrapped %s, %d bytes in %.2f s\n", p.task,
                                  p.bytes, p.elapsed_s))
  elseif p.done then
    io.stderr:write(string.format("wordcount: restored %d records in %.2f s\n", p.records,
                                  p.elapsed_s))
  end
end)

return app
