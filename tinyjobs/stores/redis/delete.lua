-- delete.lua: remove a job in any state, with its steps, executions and index entries. A
-- running job's lease goes with it (its token is forgotten: a late settlement finds nothing).
-- Unless it was done, its blocked dependents are cancelled on record (DEP-01).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:job:<id>,
--   P:steps:<id>, P:exec:<id>, P:deps:<id>, P:kids:<id>, P:q:<q>:*, P:leases, P:tok, P:holders,
--   P:hold:<holder>, P:keys, P:st:<state>, P:counts, P:expiry, P:created, P:ended:<outcome>,
--   P:ended (older layout), P:dur:*, P:dursum
-- ARGV: now ('' = server TIME), id
-- Returns 1 when deleted, 0 for an unknown id.
local now = clock(ARGV[1])
local id = ARGV[2]
local j = load(id)
if not j then
  return 0
end
if j.st == 'running' then
  clear_lease(id, j)
end
delete(id, j)
if j.st ~= 'done' and j.hd then
  cancel_dependents(id, DELETED, now)
end
flush()
return 1
