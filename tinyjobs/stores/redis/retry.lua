-- retry.lua: make a failed or cancelled job due now with a fresh budget of attempts, in one
-- atomic step.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:job:<id>,
--   P:q:<q>:ready|sched|wake, P:queues, P:keys, P:st:<state>, P:counts, P:expiry
-- ARGV: now ('' = server TIME), id
-- Returns 1 when done, 0 for any other state or an unknown id.
local now = clock(ARGV[1])
local id = ARGV[2]
local j = load(id)
if not j or (j.st ~= 'failed' and j.st ~= 'cancelled') then
  return 0
end
index(j.st, j.q, j.s, id, -1)
redis.call('ZREM', P .. ':expiry', id)
redis.call('HSET', jk(id), 'ma', tonumber(j.a) + tonumber(j.b), 'c', '0')
redis.call('HDEL', jk(id), 'fa', 'x')
if j.k then
  redis.call('HSETNX', P .. ':keys', j.k, id)
end
redis.call('SADD', P .. ':queues', j.q)
place(id, j, now, now)
flush()
return 1
