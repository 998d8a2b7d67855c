-- cancel.lua: cancel a job in one atomic step. Pending or blocked: removed, its blocked
-- dependents cancelled on record. Running: marked; its worker learns at the next renewal.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:job:<id>,
--   P:steps:<id>, P:exec:<id>, P:deps:<id>, P:q:<q>:ready|sched, P:keys, P:st:<state>, P:counts,
--   P:expiry
-- ARGV: now ('' = server TIME), id
-- Returns 1 when cancelled (or marked), 0 when unknown or final.
local now = clock(ARGV[1])
local id = ARGV[2]
local j = load(id)
if not j then
  return 0
end
if j.st == 'pending' or j.st == 'blocked' then
  delete(id, j)
  if j.hd then
    cancel_dependents(id, 'cancelled', now)
  end
  flush()
  return 1
end
if j.st == 'running' then
  redis.call('HSET', jk(id), 'c', '1')
  return 1
end
return 0
