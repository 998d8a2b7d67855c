-- end_leases.lua: end every lease of the given holders at once, as reap does, with executions
-- ending 'worker lost' (DUR-02). One atomic step. Jobs handed over to them and never popped are
-- given back (undo_handover), and their registrations as waiting workers removed.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:hold:<holder>,
--   P:holders, P:job:<id>, P:exec:<id>, P:deps:<id>, P:q:<q>:*, P:leases, P:tok, P:keys,
--   P:st:<state>, P:counts, P:expiry, P:limited (reads only), P:handed:<holder>, P:hand:<holder>,
--   P:q:<q>:idle
-- ARGV: now ('' = server TIME), holder id, holder id, ...
-- Returns how many jobs.
local now = clock(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local h = ARGV[i]
  -- Jobs handed over to it and never popped: given back, no attempt began (undo_handover).
  -- Those its wait() popped are its own (a worker that stops gives back those it did not
  -- start: give_back.lua); one that died with them ends them below, on record.
  n = n + undo_hand_list(h, now)
  -- Jobs an older version handed over to it and no claim took (P:handed: see _lib.lua).
  for _, id in ipairs(redis.call('HKEYS', P .. ':handed:' .. h)) do
    local j = load(id)
    if j and j.st == 'running' and j.h == h and undo_legacy_handover(id, j, h, now) then
      n = n + 1
    end
  end
  redis.call('DEL', P .. ':handed:' .. h, P .. ':hand:' .. h)
  -- Its registrations as a waiting worker go: nothing more is handed to it.
  for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
    redis.call('HDEL', qk(q, 'idle'), h)
  end
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
