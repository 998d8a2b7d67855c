-- resign.lua: give up a named leadership lease if `holder` has it, in one atomic step.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:lead
-- ARGV: now (unused), name, holder
-- Returns 1 when given up, else 0.
local cur = redis.call('HGET', P .. ':lead', ARGV[2])
if cur and string.match(cur, '^(.*)\t[^\t]*$') == ARGV[3] then
  redis.call('HDEL', P .. ':lead', ARGV[2])
  return 1
end
return 0
