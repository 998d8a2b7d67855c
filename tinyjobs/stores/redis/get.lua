-- get.lua: one job's row, its `ahead` when pending (JOB-11) and, when asked, its executions.
-- Reads only.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:job:<id>,
--   P:exec:<id>, P:q:<q>:ready|sched (reads only)
-- ARGV: now ('' = server TIME), id, executions ('1' = include)
-- Returns the JSON text of {now} for an unknown job, else of {now, flat job hash, ahead
-- (-1 = none), executions}.
local now = clock(ARGV[1])
local id = ARGV[2]
local j, flat = load(id)
if not j then
  return cjson.encode({num(now)})
end
local ahead = -1
if j.st == 'pending' then
  -- Jobs before this one in claim order, due by max(now, its due): ready ones are compared by
  -- member; scheduled ones due in time are counted one by one.
  local rk = qk(j.q, 'ready')
  ahead = redis.call('ZRANK', rk, j.m) or redis.call('ZLEXCOUNT', rk, '-', '(' .. j.m)
  local bound = math.max(now, tonumber(j.d))
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', qk(j.q, 'sched'), '-inf', num(bound))) do
    if m < j.m then
      ahead = ahead + 1
    end
  end
end
local execs = {}
if ARGV[3] == '1' then
  execs = redis.call('LRANGE', P .. ':exec:' .. id, 0, -1)
end
return cjson.encode({num(now), flat, ahead, execs})
