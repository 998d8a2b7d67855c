-- workers.lua: every worker heartbeat, dropping those silent since before `drop_before`.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:workers
-- ARGV: now ('' = server TIME), seconds of silence past which a beat is dropped
-- Returns the JSON text of {now, {{'<host>\t<pid>', JSON beat}, ...}}.
local now = clock(ARGV[1])
local horizon = now - tonumber(ARGV[2])
local out = {}
local flat = redis.call('HGETALL', P .. ':workers')
for i = 1, #flat, 2 do
  local beat = cjson.decode(flat[i + 1])
  if tonumber(beat.n) < horizon then
    redis.call('HDEL', P .. ':workers', flat[i])
  else
    table.insert(out, {flat[i], flat[i + 1]})
  end
end
return cjson.encode({num(now), out})
