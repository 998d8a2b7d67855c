-- queue_stats.lua: per queue (with jobs, or paused): reported state -> jobs, the due time of
-- its oldest due pending job, and whether it is paused. Reads only.
-- The oldest due job: the head of `sched` up to now, and the head of each priority's run of
-- `ready` (members sort by priority, then due): one lookup per distinct priority.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:queues, P:paused,
--   P:q:<q>:ready|sched|run, P:counts, P:leases, P:job:<id> (reads only)
-- ARGV: now ('' = server TIME)
-- Returns the JSON text of {now, {{queue, {state, n, ...}, oldest due or '', '1' paused or '',
--   running jobs past their lease (at most 10,000 looked at)}}}.
local now = clock(ARGV[1])
local queues = {}
for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do queues[q] = {} end
local paused = {}
for _, q in ipairs(redis.call('SMEMBERS', P .. ':paused')) do
  paused[q] = true
  queues[q] = queues[q] or {}
end
local function put(q, st, n)
  if n > 0 then
    queues[q] = queues[q] or {}
    table.insert(queues[q], st); table.insert(queues[q], n)
  end
end
local flat = redis.call('HGETALL', P .. ':counts')
for i = 1, #flat, 2 do
  local q, st = string.match(flat[i], '^(.*)\t([^\t]*)$')
  put(q, st, tonumber(flat[i + 1]))
end
-- Running jobs past their lease, not yet reaped (reap takes <= now): the head of P:leases.
local past = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. ':leases', '-inf', num(now), 'LIMIT', 0, 10000)) do
  local q, st = unpack(redis.call('HMGET', jk(id), 'q', 'st'))
  if q and st == 'running' then past[q] = (past[q] or 0) + 1 end
end
local out = {}
for q, counts in pairs(queues) do
  local sk, rk = qk(q, 'sched'), qk(q, 'ready')
  put(q, 'waiting', redis.call('ZCARD', rk) + redis.call('ZCOUNT', sk, '-inf', num(now)))
  put(q, 'scheduled', redis.call('ZCOUNT', sk, '(' .. num(now), '+inf'))
  put(q, 'running', redis.call('SCARD', qk(q, 'run')))
  local oldest = nil
  local head = redis.call('ZRANGEBYSCORE', sk, '-inf', num(now), 'WITHSCORES', 'LIMIT', 0, 1)
  if #head > 0 then oldest = tonumber(head[2]) end
  local first = redis.call('ZRANGE', rk, 0, 0)
  while #first > 0 do
    local m = first[1]
    local due = tonumber(string.sub(m, 12, 28)) / 1000000
    if oldest == nil or due < oldest then oldest = due end
    -- The first member of the next priority: past every member with this 11-digit prefix.
    first = redis.call('ZRANGEBYLEX', rk, '(' .. string.sub(m, 1, 11) .. '\255', '+', 'LIMIT', 0, 1)
  end
  table.insert(out, {q, queues[q], oldest and num(oldest) or '', paused[q] and '1' or '', past[q] or 0})
end
return cjson.encode({num(now), out})
