-- give_back.lua: a worker that stops gives back the jobs handed over to it that it did not start
-- (RedisStore.give_back_unstarted), in one atomic step: its registrations as a waiting worker go
-- first (nothing more is handed to it), then every job on P:hand:<holder> (never popped) and
-- every popped one named here, while its handed lease (the token) is still on it, is given back
-- whole (undo_handover: no attempt began, no execution on record).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:q:<q>:idle,
--   P:hand:<holder>, P:job:<id>, P:exec:<id>, P:q:<q>:ready|sched|run|grun|wake, P:leases,
--   P:holders, P:hold:<holder>, P:tok, P:limited (reads only)
-- ARGV: now ('' = server TIME), holder id, number of queues, the queues, then the popped jobs
--   as id, token, id, token, ...
-- Returns how many jobs were given back.
local now = clock(ARGV[1])
local h = ARGV[2]
local nq = tonumber(ARGV[3])
for i = 4, 3 + nq do
  redis.call('HDEL', qk(ARGV[i], 'idle'), h)
end
local n = undo_hand_list(h, now)
redis.call('DEL', P .. ':hand:' .. h)
for i = 4 + nq, #ARGV, 2 do
  local id = ARGV[i]
  local j = load(id)
  if j and j.st == 'running' and j.h == h and j.tk == ARGV[i + 1] then
    undo_handover(id, j, now, nil)
    n = n + 1
  end
end
flush()
return n
