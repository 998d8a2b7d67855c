-- renew.lua: extend every live lease named by a token, in one atomic step.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:tok, P:job:<id>,
--   P:leases
-- ARGV: now ('' = server TIME), token, token, ...
-- Returns one status per token: 'ok', 'lost' or 'cancel'.
local now = clock(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local tk = ARGV[i]
  local id = token_job(tk)
  local f = id and redis.call('HMGET', jk(id), 'tk', 'st', 'ls', 'c')
  if not f or f[1] ~= tk or f[2] ~= 'running' then
    table.insert(out, 'lost')
  else
    local le = now + tonumber(f[3])
    redis.call('HSET', jk(id), 'le', num(le))
    redis.call('ZADD', P .. ':leases', le, id)
    table.insert(out, f[4] == '1' and 'cancel' or 'ok')
  end
end
return out
