-- fire_cron.lua: enqueue a cron schedule's job for due time `due`, once (CRON-01): when `due`
-- is later than the last due time fired, record it and add the job, in one atomic step.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:cron, then as
--   enqueue.lua
-- ARGV: now ('' = server TIME), schedule, due, then the job's 13 values as in enqueue.lua
-- Returns 1 when this call fired, else 0.
local now = clock(ARGV[1])
local last = redis.call('HGET', P .. ':cron', ARGV[2])
local due = tonumber(ARGV[3])
if last and tonumber(last) >= due then
  return 0
end
redis.call('HSET', P .. ':cron', ARGV[2], num(due))
enqueue_one({unpack(ARGV, 4, 16)}, now)
flush()
return 1
