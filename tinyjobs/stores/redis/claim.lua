-- claim.lua: take leases on up to `limit` due jobs of the named queues, in one atomic step,
-- counting each queue's limits (concurrency, rate, group_concurrency, group_rate) in that step.
-- Order across queues: priority desc, due asc, seq asc (the member order of `ready`). Records
-- in P:limited which queues this claim passed limits for, so that a lease ending on them wakes
-- waiters (written only when that changes).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:job:<id>,
--   P:steps:<id>, P:exec:<id>, P:q:<q>:ready|sched|run|grun|starts|gs:<group>, P:leases,
--   P:holders, P:hold:<holder>, P:limited, P:paused, P:q:<q>:idle, P:queues
-- ARGV: now ('' = server TIME), holder id, hostname, pid, token base (hex), limit, '1' when the
--   holder waits for handovers (it registers when it finds nothing: see nothing_due), then 8
--   values per queue: name, lease seconds, concurrency, rate starts, rate period, group concurrency,
--   group rate starts, group rate period ('' = no limit)
-- Returns the JSON text of {now, {{id, flat job hash as read, flat fields written, flat steps
-- hash}, ...}} (an empty Lua table encodes as {}); the fields written go in place over the
-- row's (the client puts them there: a table of the row's fields to do it here cost more).
local now = clock(ARGV[1])

-- Nothing to claim (the worker's claim with each settlement at a low rate, an idle worker's
-- poll): no queue has a job in `ready` or one in `sched` that came due. Found with a command or
-- two per queue and answered at once: the whole claim below cost about 100k instructions of the
-- server's to find the same.
local function nothing_due()
  for i = 8, #ARGV, 8 do
    if redis.call('EXISTS', qk(ARGV[i], 'ready')) == 1
      or redis.call('ZCOUNT', qk(ARGV[i], 'sched'), '-inf', num(now)) > 0 then
      return false
    end
  end
  return true
end
if nothing_due() then
  if ARGV[7] ~= '' then
    -- A worker with room that found nothing (and waits on P:hand:<holder>: see RedisStore.wait)
    -- registers for each queue without limits that holds jobs (purge deletes the registrations
    -- with their queue), until IDLE_FOR from now: a single enqueue may hand its job over to it
    -- (_lib.lua, enqueue_one). The claim's token base, which no other claim has, names the
    -- lease then ('0000': this claim's own leases count from 1).
    local tail = '\t' .. ARGV[5] .. '\t'
    local who = '\t' .. ARGV[3] .. '\t' .. string.format('%d', ARGV[4])
    for i = 8, #ARGV, 8 do
      if ARGV[i + 2] == '' and ARGV[i + 3] == '' and ARGV[i + 5] == '' and ARGV[i + 6] == ''
        and redis.call('SISMEMBER', P .. ':queues', ARGV[i]) == 1 then
        redis.call('HSET', qk(ARGV[i], 'idle'), ARGV[2], num(now + IDLE_FOR) .. tail .. ARGV[i + 1] .. who)
        local hints = idle_hint[P] or {}
        hints[ARGV[i]], idle_hint[P] = true, hints
      end
    end
  end
  return '["' .. num(now) .. '",{}]'  -- cjson.encode({num(now), {}})
end

local holder, host, pid, base, limit = ARGV[2], ARGV[3], string.format('%d', ARGV[4]), ARGV[5], tonumber(ARGV[6])

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

-- Each queue's `ready` set is read a page at a time (batch members), in member order.
local batch = math.min(math.max(limit * 2, 16), 500)

-- The queues with something due. The first page of `ready` is read before anything else of a
-- queue: one with nothing due (the worker's claim after each settlement, at a low rate) costs
-- the promotion and this read, not its pause flag, limits and marker as well. Skipping the
-- marker there is safe: the job that next becomes due pushes a wake-up token of its own, and
-- the claim that then finds it marks the queue.
local qs, names, due_qs = {}, {}, {}
for i = 8, #ARGV, 8 do
  local s = {name = ARGV[i], lease = tonumber(ARGV[i + 1]), gc = opt(ARGV[i + 5]),
    grn = opt(ARGV[i + 6]), grp = opt(ARGV[i + 7]), pos = 1, taken = {}, groups = {},
    avail = limit}
  promote(s.name)
  s.buf = redis.call('ZRANGE', qk(s.name, 'ready'), 0, batch - 1)
  s.off, s.done, s.last = #s.buf, #s.buf == 0, #s.buf < batch
  if not s.done then
    if redis.call('SISMEMBER', P .. ':paused', s.name) == 1 then
      s.avail = 0  -- LIM-04: a paused queue's jobs stay where they are
    end
    local conc, rn = opt(ARGV[i + 2]), opt(ARGV[i + 3])
    s.limited = (conc or rn or s.gc or s.grn) and true or false
    table.insert(names, s.name)
    table.insert(due_qs, s)
    if conc then
      s.avail = math.min(s.avail, conc - redis.call('SCARD', qk(s.name, 'run')))
    end
    if rn then
      s.rk, s.rp = qk(s.name, 'starts'), tonumber(ARGV[i + 4])
      s.avail = math.min(s.avail, rn - window(s.rk, s.rp))
    end
  end
  table.insert(qs, s)
end

-- Mark the queues with limits (lease ends wake them, see flush), unmark those without.
if #names > 0 then
  local marked = redis.call('HMGET', P .. ':limited', unpack(names))
  for i, s in ipairs(due_qs) do
    if s.limited and not marked[i] then
      redis.call('HSET', P .. ':limited', s.name, '1')
    elseif marked[i] and not s.limited then
      redis.call('HDEL', P .. ':limited', s.name)
    end
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

-- The fields `take` reads before it decides, when it reads them alone (see take).
local DECIDES = {'g', 'd', 'st', 'a', 'hs'}

-- Those fields, found in a whole row as HGETALL gives it (a scan of the reply: no table of
-- every field to build), as st, d, a, g, hs (false when missing); nil for no row.
local function decides(flat)
  if #flat == 0 then return nil end
  local st, d, a, g, hs = false, false, false, false, false
  for i = 1, #flat, 2 do
    local k = flat[i]
    if k == 'st' then st = flat[i + 1]
    elseif k == 'd' then d = flat[i + 1]
    elseif k == 'a' then a = flat[i + 1]
    elseif k == 'g' then g = flat[i + 1]
    elseif k == 'hs' then hs = flat[i + 1]
    end
  end
  return st, d, a, g, hs
end

local host_json  -- the host as a JSON string, for the execution's start entry (made once)
local out = {}
local function take(s, id, m)
  local jkey = jk(id)
  -- A queue without group limits takes every due job it meets: the whole row, which the reply
  -- carries, is read at once (one read where a few fields, then the row, took two). With group
  -- limits a job of a full group is passed over, often many in a row: those few fields first.
  local flat, st, d, a, g, hs = nil, nil, nil, nil, nil, nil
  if s.gc or s.grn then
    local f = load_fields(id, DECIDES)
    if f then st, d, a, g, hs = f.st, f.d, f.a, f.g, f.hs end
  else
    flat = redis.call('HGETALL', jkey)
    st, d, a, g, hs = decides(flat)
  end
  if st ~= 'pending' then
    table.insert(s.taken, m)  -- a stale entry: drop it
    return
  end
  if tonumber(d) > now then return end
  local c = nil
  if g and (s.gc or s.grn) then
    c = group_room(s, g)
    if not c then return end
  end
  local tk = base .. string.format('%04x', #out + 1) .. '-' .. id  -- see token_job
  local le, at = now + s.lease, string.format('%d', tonumber(a) + 1)
  local changed = {'st', 'running', 'a', at, 'sa', num(now), 'tk', tk, 'le', num(le), 'ls', num(s.lease), 'h', holder}
  redis.call('HSET', jkey, unpack(changed))
  table.insert(s.taken, m)
  later('SADD', qk(s.name, 'run'), id)
  if g then redis.call('HINCRBY', qk(s.name, 'grun'), g, '1') end
  later('ZADD', P .. ':leases', num(le), id)
  later('SADD', P .. ':hold:' .. holder, id)
  -- The start entry {a, h, p, s} written out (cjson.encode of a table cost as much as a write).
  host_json = host_json or cjson.encode(host)
  redis.call('RPUSH', P .. ':exec:' .. id,
    '{"a":' .. at .. ',"h":' .. host_json .. ',"p":' .. pid .. ',"s":"' .. num(now) .. '"}')
  if s.rk then record(s.rk, s.rp, tk) end
  if c then
    c.run, c.starts = c.run + 1, c.starts + 1
    if s.grn then record(qk(s.name, 'gs:' .. g), s.grp, tk) end
  end
  s.avail = s.avail - 1
  local steps = hs and redis.call('HGETALL', P .. ':steps:' .. id) or {}
  -- The row as read before the values just written (`changed`, which the client puts in
  -- place), or, for a row read in part, the whole row as it is now.
  table.insert(out, {id, flat or redis.call('HGETALL', jkey), changed, steps})
end

-- Merge the queues' `ready` sets in member order, skipping full groups (LIM-03).
local scanned, cap = 0, limit + 2000
while #out < limit and scanned < cap do
  local best, bm = nil, nil
  for _, s in ipairs(qs) do
    if s.avail > 0 and not s.done then
      if s.pos > #s.buf then
        -- A short page was the last (`ready` changes only at the end of this script): the
        -- queue is done without reading an empty page.
        s.buf = s.last and {} or redis.call('ZRANGE', qk(s.name, 'ready'), s.off, s.off + batch - 1)
        s.off, s.pos = s.off + #s.buf, 1
        s.done, s.last = #s.buf == 0, #s.buf < batch
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
if ARGV[7] ~= '' and #out == limit then
  -- Full now: registrations this holder left as a waiting worker go (see nothing_due above).
  for _, s in ipairs(qs) do
    redis.call('HDEL', qk(s.name, 'idle'), holder)
  end
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
