-- claim.lua: take leases on up to `limit` due jobs of the named queues, in one atomic step,
-- counting each queue's limits (concurrency, rate, group_concurrency, group_rate) in that step.
-- Order across queues: priority desc, due asc, seq asc (the member order of `ready`). Records
-- in P:limited which queues this claim passed limits for, so that a lease ending on them wakes
-- waiters (written only when that changes).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:job:<id>,
--   P:steps:<id>, P:exec:<id>, P:q:<q>:ready|sched|run|grun|starts|gs:<group>, P:leases, P:tok,
--   P:holders, P:hold:<holder>, P:limited, P:paused
-- ARGV: now ('' = server TIME), holder id, hostname, pid, token base (hex), limit, then 8 values
--   per queue: name, lease seconds, concurrency, rate starts, rate period, group concurrency,
--   group rate starts, group rate period ('' = no limit)
-- Returns the JSON text of {now, {{id, flat job hash, flat steps hash}, ...}} (an empty Lua
-- table encodes as {}).
local now = clock(ARGV[1])
local holder, host, pid, base, limit = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])

local function opt(v)
  if v == '' then return nil end
  return tonumber(v)
end

-- Move scheduled jobs that came due into `ready` (at most 1000 per queue and call).
local function promote(q)
  local sk = qk(q, 'sched')
  local due = redis.call('ZRANGEBYSCORE', sk, '-inf', num(now), 'LIMIT', 0, 1000)
  if #due == 0 then return end
  local rk = qk(q, 'ready')
  for i = 1, #due do
    redis.call('ZADD', rk, '0', due[i])
  end
  redis.call('ZREM', sk, unpack(due))
end

-- Starts recorded in (now - period, now]; older ones are dropped.
local function window(key, period)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now - period))
  return redis.call('ZCOUNT', key, '(' .. num(now - period), num(now))
end

local function record(key, period, tk)
  redis.call('ZADD', key, num(now), tk)
  redis.call('EXPIRE', key, string.format('%d', math.ceil(period) + 1))
end

local qs, names = {}, {}
for i = 7, #ARGV, 8 do
  local s = {name = ARGV[i], lease = tonumber(ARGV[i + 1]), gc = opt(ARGV[i + 5]),
    grn = opt(ARGV[i + 6]), grp = opt(ARGV[i + 7]), off = 0, pos = 1, buf = {}, taken = {},
    groups = {}, avail = limit}
  promote(s.name)
  if redis.call('SISMEMBER', P .. ':paused', s.name) == 1 then
    s.avail = 0  -- LIM-04: a paused queue's jobs stay where they are
  end
  local conc, rn = opt(ARGV[i + 2]), opt(ARGV[i + 3])
  s.limited = (conc or rn or s.gc or s.grn) and true or false
  table.insert(names, s.name)
  if conc then
    s.avail = math.min(s.avail, conc - redis.call('SCARD', qk(s.name, 'run')))
  end
  if rn then
    s.rk, s.rp = qk(s.name, 'starts'), tonumber(ARGV[i + 4])
    s.avail = math.min(s.avail, rn - window(s.rk, s.rp))
  end
  table.insert(qs, s)
end

-- Mark the queues with limits (lease ends wake them, see flush), unmark those without.
local marked = redis.call('HMGET', P .. ':limited', unpack(names))
for i, s in ipairs(qs) do
  if s.limited and not marked[i] then
    redis.call('HSET', P .. ':limited', s.name, '1')
  elseif marked[i] and not s.limited then
    redis.call('HDEL', P .. ':limited', s.name)
  end
end

-- The group's counts for this call, or nil when the group is full.
local function group_room(s, g)
  local c = s.groups[g]
  if c == nil then
    c = {run = 0, starts = 0}
    if s.gc then c.run = tonumber(redis.call('HGET', qk(s.name, 'grun'), g) or 0) end
    if s.grn then c.starts = window(qk(s.name, 'gs:' .. g), s.grp) end
    s.groups[g] = c
  end
  if (s.gc and c.run >= s.gc) or (s.grn and c.starts >= s.grn) then return nil end
  return c
end

local out = {}
local function take(s, id, m)
  local jkey = jk(id)
  local f = redis.call('HMGET', jkey, 'g', 'd', 'st', 'a', 'hs')
  if f[3] ~= 'pending' then
    table.insert(s.taken, m)  -- a stale entry: drop it
    return
  end
  if tonumber(f[2]) > now then return end
  local g, c = f[1], nil
  if g and (s.gc or s.grn) then
    c = group_room(s, g)
    if not c then return end
  end
  local tk = base .. string.format('%04x', #out + 1)
  local a, le = tonumber(f[4]) + 1, now + s.lease
  redis.call('HSET', jkey, 'st', 'running', 'a', string.format('%d', a), 'sa', num(now), 'tk', tk, 'le', num(le),
    'ls', num(s.lease), 'h', holder)
  table.insert(s.taken, m)
  later('SADD', qk(s.name, 'run'), id)
  if g then redis.call('HINCRBY', qk(s.name, 'grun'), g, '1') end
  later('ZADD', P .. ':leases', num(le), id)
  later('HSET', P .. ':tok', tk, id)
  later('SADD', P .. ':hold:' .. holder, id)
  redis.call('RPUSH', P .. ':exec:' .. id, cjson.encode({a = a, h = host, p = pid, s = num(now)}))
  if s.rk then record(s.rk, s.rp, tk) end
  if c then
    c.run, c.starts = c.run + 1, c.starts + 1
    if s.grn then record(qk(s.name, 'gs:' .. g), s.grp, tk) end
  end
  s.avail = s.avail - 1
  local steps = f[5] and redis.call('HGETALL', P .. ':steps:' .. id) or {}
  table.insert(out, {id, redis.call('HGETALL', jkey), steps})
end

-- Merge the queues' `ready` sets in member order, skipping full groups (LIM-03).
local batch = math.min(math.max(limit * 2, 16), 500)
local scanned, cap = 0, limit + 2000
while #out < limit and scanned < cap do
  local best, bm = nil, nil
  for _, s in ipairs(qs) do
    if s.avail > 0 and not s.done then
      if s.pos > #s.buf then
        s.buf = redis.call('ZRANGE', qk(s.name, 'ready'), s.off, s.off + batch - 1)
        s.off, s.pos = s.off + #s.buf, 1
        s.done = #s.buf == 0
      end
      if not s.done and (bm == nil or s.buf[s.pos] < bm) then
        best, bm = s, s.buf[s.pos]
      end
    end
  end
  if not best then break end
  best.pos, scanned = best.pos + 1, scanned + 1
  take(best, string.sub(bm, 41), bm)
end
for _, s in ipairs(qs) do
  if #s.taken > 0 then
    redis.call('ZREM', qk(s.name, 'ready'), unpack(s.taken))
  end
end
if #out > 0 then
  redis.call('SADD', P .. ':holders', holder)
end
flush()
return cjson.encode({num(now), out})
