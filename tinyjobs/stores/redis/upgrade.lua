-- upgrade.lua: move one chunk of P:ended (the layout before P:ended:<outcome>) into the
-- per-outcome sorted sets. RedisStore calls it on open until it reports nothing left. Each chunk
-- is atomic (the entries leave P:ended and join P:ended:<outcome> in one step), so a reader sees
-- every execution once, in one key or the other, and an upgrade cut short anywhere leaves the
-- rest in P:ended, where finished_series still reads it and deletes still remove from it; the
-- next open goes on. A chunk is small enough not to hold Redis up (a few ms).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:ended,
--   P:ended:<outcome>
-- ARGV: the most entries to move
-- Returns how many entries P:ended still holds.
local popped = redis.call('ZPOPMIN', P .. ':ended', tonumber(ARGV[1]))
local per = {}
for i = 1, #popped, 2 do
  local m, outcome = string.match(popped[i], '^(.*\t%d+)\t(.*)$')
  local key = P .. ':ended:' .. outcome
  if not per[key] then per[key] = {} end
  table.insert(per[key], popped[i + 1])
  table.insert(per[key], m)
end
for key, args in pairs(per) do
  for i = 1, #args, 4000 do
    redis.call('ZADD', key, unpack(args, i, math.min(#args, i + 3999)))
  end
end
return redis.call('ZCARD', P .. ':ended')
