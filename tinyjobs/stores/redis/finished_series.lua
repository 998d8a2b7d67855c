-- finished_series.lua: executions that ended in [since, now], counted per (bucket, outcome),
-- buckets of `step` seconds from `since`. Reads P:ended over the window only. Reads only.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:ended (reads only)
-- ARGV: now ('' = server TIME), since, step
-- Returns the JSON text of {{bucket start, outcome, n}, ...}.
local now = clock(ARGV[1])
local since, step = tonumber(ARGV[2]), tonumber(ARGV[3])
local counts, order = {}, {}
local ended = redis.call('ZRANGEBYSCORE', P .. ':ended', num(since), num(now), 'WITHSCORES')
for i = 1, #ended, 2 do
  local outcome = string.match(ended[i], '\t[^\t]*\t(.*)$')
  local bucket = since + math.floor((tonumber(ended[i + 1]) - since) / step) * step
  local k = num(bucket) .. '\t' .. outcome
  if not counts[k] then
    counts[k] = {num(bucket), outcome, 0}
    table.insert(order, k)
  end
  counts[k][3] = counts[k][3] + 1
end
local out = {}
for _, k in ipairs(order) do table.insert(out, counts[k]) end
return cjson.encode(out)
