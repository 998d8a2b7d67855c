-- enqueue.lua: add a batch of jobs in one atomic step (see _lib.lua for the key layout).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:seq, P:job:<id>,
--   P:steps:<id>, P:exec:<id> (replaced jobs), P:deps:<parent>, P:q:<q>:ready|sched|wake, P:queues,
--   P:keys, P:st:<state>, P:counts, P:expiry; for a job handed to a waiting worker (enqueue_one):
--   P:q:<q>:idle|run|grun, P:paused, P:leases, P:holders, P:hold:<holder>, P:hand:<holder>
-- ARGV[1] = now ('' = server TIME)
-- ARGV[2] = JSON array of jobs, each an array of 13 strings: id, task, queue, payload,
--   priority, delay, at, key, group, after (JSON array), max attempts, dedupe, keep ('' = none)
--   (one JSON argument costs the client far less than 13 per job)
-- or, for one job, ARGV[2..14] = its 13 strings: the commonest call, a single enqueue, then
--   spares the JSON on both sides (encoding and decoding it cost more than the 13 arguments)
-- Returns the JSON text of {now, result per job} (see enqueue_one; one string is far cheaper
-- for the client to read than nested arrays), for one job in ARGV[2..14] the array {now, its
-- result's values...}, or {'!', parent id, job id} when an `after` id does not exist: then
-- nothing of the batch was written.
local now = clock(ARGV[1])
local single = #ARGV == 14
if single and ARGV[11] == '' then
  -- One job without parents (the commonest call): its values straight from ARGV, its result
  -- array the reply (no batch tables, no parents to look up).
  -- On the server's clock only (a caller's `now` may be a test's, and a handed lease's expiry
  -- must be on the clock its holder renews it by), it may be handed to a waiting worker.
  local one = enqueue_one({unpack(ARGV, 2, 14)}, now, ARGV[1] == '')
  flush()
  return {num(now), unpack(one)}
end
local jobs = single and {{unpack(ARGV, 2, 14)}} or cjson.decode(ARGV[2])
local seen = {}
for _, a in ipairs(jobs) do
  if a[10] ~= '' then
    for _, pid in ipairs(cjson.decode(a[10])) do
      if not seen[pid] and redis.call('EXISTS', jk(pid)) == 0 then
        return {'!', pid, a[1]}
      end
    end
  end
  seen[a[1]] = true
end
local out = {}
for _, a in ipairs(jobs) do
  table.insert(out, enqueue_one(a, now))
end
flush()
if single then
  table.insert(out[1], 1, num(now))  -- one array, where {now, result} made Redis reply with two
  return out[1]
end
return cjson.encode({num(now), out})
