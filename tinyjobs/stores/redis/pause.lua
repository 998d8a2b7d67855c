-- pause.lua: pause or resume a queue (LIM-04). Paused: claim.lua takes none of its jobs from
-- the moment this returns (scripts run one at a time). Resumed: a wake-up token for its waiters.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:paused,
--   P:q:<q>:wake
-- ARGV: '1' to pause or '0' to resume, queue
-- Returns 1 when that changed the queue's state, else 0.
local q = ARGV[2]
if ARGV[1] == '1' then
  return redis.call('SADD', P .. ':paused', q)
end
local changed = redis.call('SREM', P .. ':paused', q)
wake(q)
flush()
return changed
