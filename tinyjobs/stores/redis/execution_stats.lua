-- execution_stats.lua: per (queue, outcome): ended executions on record, the sum of their
-- durations and the number at or under each bound (ZCOUNT on the duration index: O(log n) per
-- bound, whatever the number of executions). Reads only.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:dursum,
--   P:dur:<queue>\t<outcome> (reads only)
-- ARGV: the bounds, ascending
-- Returns the JSON text of {{queue, outcome, count, sum, {n per bound}}, ...}.
local out = {}
for _, pair in ipairs(redis.call('HKEYS', P .. ':dursum')) do
  local q, outcome = string.match(pair, '^(.*)\t([^\t]*)$')
  local key = P .. ':dur:' .. pair
  local per = {}
  for i = 1, #ARGV do
    per[i] = redis.call('ZCOUNT', key, '-inf', ARGV[i])
  end
  local sum = redis.call('HGET', P .. ':dursum', pair) or '0'
  table.insert(out, {q, outcome, redis.call('ZCARD', key), sum, per})
end
return cjson.encode(out)
