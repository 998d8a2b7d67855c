-- beat.lua: record a worker's heartbeat, seen at now. workers.lua reads them.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:workers
-- ARGV: now ('' = server TIME), '<host>\t<pid>', JSON {q, sl, b, sa}
-- Returns nothing.
local now = clock(ARGV[1])
local beat = cjson.decode(ARGV[3])
beat.n = num(now)
redis.call('HSET', P .. ':workers', ARGV[2], cjson.encode(beat))
return 0
