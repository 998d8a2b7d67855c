-- reap.lua: return jobs whose lease expired (lease_expires <= now) to waiting, or to failed or
-- cancelled; their executions end 'lease expired'. One atomic step. A job handed over to a
-- holder that never took it (P:handed:<holder>) is given back instead (undo_handover).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:leases, P:job:<id>,
--   P:exec:<id>, P:deps:<id>, P:q:<q>:*, P:tok, P:holders, P:hold:<holder>, P:keys, P:st:<state>,
--   P:counts, P:expiry, P:limited (reads only), P:handed:<holder>
-- ARGV: now ('' = server TIME), limit
-- Returns how many jobs.
local now = clock(ARGV[1])
local n = 0
local expired = redis.call('ZRANGEBYSCORE', P .. ':leases', '-inf', num(now), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(expired) do
  local j = load(id)
  if j and j.st == 'running' and redis.call('HEXISTS', P .. ':handed:' .. j.h, id) == 1 then
    undo_handover(id, j, now)  -- handed over, never taken: no attempt began
    n = n + 1
  elseif j and j.st == 'running' then
    end_lease(id, j, OUTCOME_LEASE_EXPIRED, now)
    n = n + 1
  else
    redis.call('ZREM', P .. ':leases', id)
  end
end
flush()
return n
