-- counts.lua: queue -> reported state -> jobs (non-zero entries only). Reads only.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:queues,
--   P:q:<q>:ready|sched|run, P:counts (reads only)
-- ARGV: now ('' = server TIME)
-- Returns a flat list of queue, state, count triples.
local now = clock(ARGV[1])
local out = {}
local function put(q, st, n)
  if n > 0 then
    table.insert(out, q); table.insert(out, st); table.insert(out, n)
  end
end
for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  local sk = qk(q, 'sched')
  put(q, 'waiting', redis.call('ZCARD', qk(q, 'ready')) + redis.call('ZCOUNT', sk, '-inf', num(now)))
  put(q, 'scheduled', redis.call('ZCOUNT', sk, '(' .. num(now), '+inf'))
  put(q, 'running', redis.call('SCARD', qk(q, 'run')))
end
local flat = redis.call('HGETALL', P .. ':counts')
for i = 1, #flat, 2 do
  local q, st = string.match(flat[i], '^(.*)\t([^\t]*)$')
  put(q, st, tonumber(flat[i + 1]))
end
return out
