-- end_leases.lua: end every lease of the given holders at once, as reap does, with executions
-- ending 'worker lost' (DUR-02). One atomic step.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:hold:<holder>,
--   P:holders, P:job:<id>, P:exec:<id>, P:deps:<id>, P:q:<q>:*, P:leases, P:tok, P:keys,
--   P:st:<state>, P:counts, P:expiry, P:limited (reads only)
-- ARGV: now ('' = server TIME), holder id, holder id, ...
-- Returns how many jobs.
local now = clock(ARGV[1])
local n = 0
for i = 2, #ARGV do
  for _, id in ipairs(redis.call('SMEMBERS', P .. ':hold:' .. ARGV[i])) do
    local j = load(id)
    if j and j.st == 'running' and j.h == ARGV[i] then
      end_lease(id, j, OUTCOME_WORKER_LOST, now)
      n = n + 1
    else
      redis.call('SREM', P .. ':hold:' .. ARGV[i], id)
    end
  end
  holders_touched[ARGV[i]] = true
end
flush()
return n
