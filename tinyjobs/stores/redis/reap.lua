-- reap.lua: return jobs whose lease expired (lease_expires <= now) to waiting, or to failed or
-- cancelled; their executions end 'lease expired'. One atomic step. A job handed over to a
-- holder that never popped it (still on P:hand:<holder>) is given back instead (undo_handover).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:leases, P:job:<id>,
--   P:exec:<id>, P:deps:<id>, P:q:<q>:*, P:tok, P:holders, P:hold:<holder>, P:keys, P:st:<state>,
--   P:counts, P:expiry, P:limited (reads only), P:hand:<holder>, P:handed:<holder>
-- ARGV: now ('' = server TIME), limit
-- Returns how many jobs.
local now = clock(ARGV[1])
local n = 0
local expired = redis.call('ZRANGEBYSCORE', P .. ':leases', '-inf', num(now), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(expired) do
  local j = load(id)
  if j and j.st == 'running' then
    -- Handed over and never popped (still on the holder's list), or handed over by an older
    -- version and never taken (P:handed): given back, no attempt began (undo_handover).
    local entry = hand_entry(j.h, id)
    if entry then
      undo_handover(id, j, now, entry)
    elseif not undo_legacy_handover(id, j, j.h, now) then
      end_lease(id, j, OUTCOME_LEASE_EXPIRED, now)
    end
    n = n + 1
  else
    redis.call('ZREM', P .. ':leases', id)
  end
end
flush()
return n
