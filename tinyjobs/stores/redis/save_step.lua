-- save_step.lua: keep a step's value under the job while the token still holds its lease.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:tok, P:job:<id>,
--   P:steps:<id>
-- ARGV: now ('' = server TIME, unused but accepted), token, step name, JSON value
-- Returns 1 when written, 0 when the lease is lost (nothing written).
local tk = ARGV[2]
local id = token_job(tk)
if not id or redis.call('HGET', jk(id), 'tk') ~= tk then
  return 0
end
redis.call('HSET', P .. ':steps:' .. id, ARGV[3], ARGV[4])
redis.call('HSET', jk(id), 'hs', '1')
return 1
