-- purge.lua: remove final jobs whose expires_at <= now, with their steps and executions, in
-- one atomic step (JOB-10); then forget queues that hold no job (with their wake-up lists and
-- P:limited markers), holders that hold no lease, and the seq counter when no job is left at
-- all, so nothing stays behind.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:expiry, P:job:<id>,
--   P:steps:<id>, P:exec:<id>, P:deps:<parent>, P:st:<state>, P:counts, P:queues, P:q:<q>:wake|idle,
--   P:limited, P:holders, P:hold:<holder> (reads only), P:seq, P:created, P:ended:<outcome>,
--   P:ended (older layout), P:dur:*, P:dursum
-- ARGV: now ('' = server TIME), limit
-- Returns how many jobs.
local now = clock(ARGV[1])
local n = 0
local expired = redis.call('ZRANGEBYSCORE', P .. ':expiry', '-inf', num(now), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(expired) do
  local j = load(id)
  if j and STORED_FINAL[j.st] then
    delete(id, j)
    n = n + 1
  else
    redis.call('ZREM', P .. ':expiry', id)
  end
end
flush()
local ck = P .. ':counts'
for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  if redis.call('EXISTS', qk(q, 'ready'), qk(q, 'sched'), qk(q, 'run')) == 0
    and redis.call('HEXISTS', ck, q .. '\tblocked') == 0
    and redis.call('HEXISTS', ck, q .. '\tdone') == 0
    and redis.call('HEXISTS', ck, q .. '\tfailed') == 0
    and redis.call('HEXISTS', ck, q .. '\tcancelled') == 0 then
    redis.call('SREM', P .. ':queues', q)
    redis.call('DEL', qk(q, 'wake'), qk(q, 'idle'))
  end
end
-- A marker of a queue that holds no job (forgotten above, or claimed from but never given a
-- job) goes too; the next claim that passes limits for the queue marks it again.
for _, q in ipairs(redis.call('HKEYS', P .. ':limited')) do
  if redis.call('SISMEMBER', P .. ':queues', q) == 0 then
    redis.call('HDEL', P .. ':limited', q)
  end
end
-- Holders whose last lease was settled (settle leaves them in P:holders) go.
for _, h in ipairs(redis.call('SMEMBERS', P .. ':holders')) do
  if redis.call('EXISTS', P .. ':hold:' .. h) == 0 then
    redis.call('SREM', P .. ':holders', h)
  end
end
if redis.call('EXISTS', P .. ':queues') == 0 then
  redis.call('DEL', P .. ':seq')
end
return n
