-- dependents.lua: the jobs enqueued after a job, in enqueue order. Reads only.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:kids:<id>,
--   P:job:<child> (reads only)
-- ARGV: id, limit
-- Returns the JSON text of {now, {{id, flat job hash}, ...}}.
local now = clock('')
local found = {}
for _, child in ipairs(redis.call('SMEMBERS', P .. ':kids:' .. ARGV[1])) do
  local j, flat = load(child)
  if j then
    table.insert(found, {tonumber(j.s), child, flat})
  end
end
table.sort(found, function(a, b) return a[1] < b[1] end)
local out = {}
for i = 1, math.min(#found, tonumber(ARGV[2])) do
  table.insert(out, {found[i][2], found[i][3]})
end
return cjson.encode({num(now), out})
