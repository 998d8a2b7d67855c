-- settle.lua: apply many settlements in one atomic step (group commit). Each applies only while
-- its token is still on the job; the lease is then cleared and the execution closed. A lease
-- that ends wakes its queue's waiters only when the queue has limits (P:limited, see flush).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:job:<id>,
--   P:exec:<id>, P:deps:<id>, P:q:<q>:ready|sched|run|grun|wake, P:leases, P:tok, P:holders,
--   P:hold:<holder>, P:keys, P:st:<state>, P:counts, P:expiry, P:limited (reads only)
-- ARGV[1] = now ('' = server TIME)
-- ARGV[2] = JSON array of settlements, each an array of 7 strings: id, token, outcome
--   (done/retry/snooze/fail/handback), result JSON, error, delay seconds, execution outcome
--   ('' = none)
-- or, for one settlement, ARGV[2] = '' and ARGV[3..9] = its 7 strings: the commonest call (a
--   lone job's), which then spares the JSON on both sides
-- Returns 1 (applied) or 0 (lease lost) per settlement.
local now = clock(ARGV[1])

-- rules.settled_state, in Lua: done wins over a cancellation asked meanwhile, which wins over
-- the rest; fail, and retry on the last attempt, fail for good; the rest wait again.
local function apply(id, j, oc, res, err, delay)
  if oc ~= 'done' then  -- the fields only these outcomes read (see FIELDS)
    local v = redis.call('HMGET', jk(id), 'a', 'ma', 'd', 'kp', 'pr')
    j.a, j.ma, j.d, j.kp, j.pr = v[1], v[2], v[3], v[4], v[5]
  end
  if j.c == '1' and oc ~= 'done' then
    finalize(id, j, 'cancelled', CANCELLED_WHILE_RUNNING, now)
  elseif oc == 'done' then
    finalize(id, j, 'done', nil, now, res)
  elseif oc == 'fail' or (oc == 'retry' and tonumber(j.a) >= tonumber(j.ma)) then
    finalize(id, j, 'failed', err, now)
  elseif oc == 'retry' then
    if err then redis.call('HSET', jk(id), 'e', err) end
    place(id, j, now + delay, now)
  else
    redis.call('HINCRBY', jk(id), 'a', -1)  -- GIVES_BACK: snooze and handback
    place(id, j, oc == 'snooze' and now + delay or tonumber(j.d), now)
  end
end

-- The fields settling reads (here and in clear_lease, close_exec, finalize, place, index). Attempts,
-- max attempts, due time, keep and priority are read by apply only for an outcome other than
-- done (a retry, a failure, a snooze, a hand-back, a cancellation), with one more HMGET: each
-- field HMGET looks up costs a walk of the row's fields (a small hash is one flat list), so a
-- lone `done` reads 12 where it read 17 (about 13k of a settlement's 410k instructions).
local FIELDS = {'st', 'tk', 'c', 'q', 'g', 'h', 'k', 'dd', 's', 'e', 'hd', 'sa'}

-- The row's FIELDS, by name: one table constructor, sized once (a table filled field by field
-- grew five times). A field the row lacks is false, as HMGET gives it, where load_fields leaves
-- it out: the same to every test of it here and in _lib.lua. The fields apply reads later are
-- in the constructor too (false until read), so that their slots are made with the table.
local function settling(id)
  local v = redis.call('HMGET', jk(id), unpack(FIELDS))
  return {st = v[1], tk = v[2], c = v[3], q = v[4], g = v[5], h = v[6], k = v[7], dd = v[8], s = v[9],
    e = v[10], hd = v[11], sa = v[12], a = false, ma = false, d = false, kp = false, pr = false}
end

local out = {}
local settlements = ARGV[2] == '' and {{unpack(ARGV, 3, 9)}} or cjson.decode(ARGV[2])
for _, a in ipairs(settlements) do
  local id, tk, oc = a[1], a[2], a[3]
  local j = settling(id)
  if j.tk ~= tk or j.st ~= 'running' then
    table.insert(out, 0)
  else
    local res, err, ex = a[4], a[5], a[7]
    if res == '' then res = nil end
    if err == '' then err = nil end
    local eo = EXECUTION_OUTCOMES[oc]  -- rules.execution_outcome
    if j.c == '1' and oc ~= 'done' then eo = OUTCOME_CANCELLED end
    close_exec(id, j, now, ex ~= '' and ex or eo, oc ~= 'done' and err or nil)
    clear_lease(id, j)
    apply(id, j, oc, res, err, tonumber(a[6]))
    table.insert(out, 1)
  end
end
flush()
return out
