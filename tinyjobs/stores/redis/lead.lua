-- lead.lua: take or renew a named leadership lease, in one atomic step: taken when free,
-- expired (expires <= now) or already held by `holder`.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:lead
-- ARGV: now ('' = server TIME), name, holder, ttl seconds
-- Returns 1 while `holder` has it, else 0.
local now = clock(ARGV[1])
local cur = redis.call('HGET', P .. ':lead', ARGV[2])
if cur then
  local h, x = string.match(cur, '^(.*)\t([^\t]*)$')
  if h ~= ARGV[3] and tonumber(x) > now then
    return 0
  end
end
redis.call('HSET', P .. ':lead', ARGV[2], ARGV[3] .. '\t' .. num(now + tonumber(ARGV[4])))
return 1
