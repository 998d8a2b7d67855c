-- jobs.lua: jobs in a reported state (all when ''), optionally of one queue, oldest (lowest
-- seq) first. Reads only.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:queues,
--   P:q:<q>:ready|sched|run, P:st:<state>, P:job:<id> (reads only)
-- ARGV: now ('' = server TIME), state ('' = all; also 'pending'), queue ('' = all), limit,
--   newest ('1' = newest first), offset (rows of that order skipped)
-- Returns the JSON text of {now, {{id, flat job hash}, ...}}.
local now = clock(ARGV[1])
local want, wq, limit = ARGV[2], ARGV[3], tonumber(ARGV[4])
local newest, offset = ARGV[5] == '1', tonumber(ARGV[6] or '0')
local function wants(s)
  return want == '' or want == s or (want == 'pending' and (s == 'waiting' or s == 'scheduled'))
end
-- Only the first offset + limit rows of the order asked for can be on the page: the rows are
-- kept in a heap of that many whose root is the worst one kept, so a row that cannot make the
-- page is dropped after one comparison (10^5 waiting jobs: no table per job, no sort of them all).
local need = offset + limit
local heap = {}  -- {seq, id or claim-order member, true for a member (the id is from byte 41)}
local function worse(x, y)  -- x comes after y in the order asked for
  if newest then return x[1] < y[1] end
  return x[1] > y[1]
end
local function keep(seq, id, member)
  local n = #heap
  if n < need then
    heap[n + 1] = {seq, id, member}
    local i = n + 1
    while i > 1 do
      local up = math.floor(i / 2)
      if not worse(heap[i], heap[up]) then break end
      heap[i], heap[up] = heap[up], heap[i]
      i = up
    end
    return
  end
  if need == 0 or (newest and seq <= heap[1][1]) or (not newest and seq >= heap[1][1]) then
    return
  end
  heap[1] = {seq, id, member}
  local i = 1
  while true do
    local l, r, top = 2 * i, 2 * i + 1, i
    if l <= n and worse(heap[l], heap[top]) then top = l end
    if r <= n and worse(heap[r], heap[top]) then top = r end
    if top == i then break end
    heap[i], heap[top] = heap[top], heap[i]
    i = top
  end
end
local function add_members(members)
  for _, m in ipairs(members) do
    keep(tonumber(string.sub(m, 29, 40)), m, true)
  end
end
local queues = (wq ~= '') and {wq} or redis.call('SMEMBERS', P .. ':queues')
for _, q in ipairs(queues) do
  if wants('waiting') then
    add_members(redis.call('ZRANGE', qk(q, 'ready'), 0, -1))
    add_members(redis.call('ZRANGEBYSCORE', qk(q, 'sched'), '-inf', num(now)))
  end
  if wants('scheduled') then
    add_members(redis.call('ZRANGEBYSCORE', qk(q, 'sched'), '(' .. num(now), '+inf'))
  end
  if wants('running') then
    for _, id in ipairs(redis.call('SMEMBERS', qk(q, 'run'))) do
      keep(tonumber(redis.call('HGET', jk(id), 's')), id)
    end
  end
end
-- The final states' sets are ordered by seq: only the first offset + limit of each, in the order
-- asked for, can be on the page, so each is read from its end in chunks until it has that many
-- (of the queue asked for) or is exhausted; no longer a read (and sort) of every finished job.
local chunk = math.max(need, 256)
for _, st in ipairs({'blocked', 'done', 'failed', 'cancelled'}) do
  if wants(st) and need > 0 then
    local key, found, start = P .. ':st:' .. st, 0, 0
    while found < need do
      local flat
      if newest then
        flat = redis.call('ZREVRANGE', key, start, start + chunk - 1, 'WITHSCORES')
      else
        flat = redis.call('ZRANGE', key, start, start + chunk - 1, 'WITHSCORES')
      end
      for i = 1, #flat, 2 do
        if found < need and (wq == '' or redis.call('HGET', jk(flat[i]), 'q') == wq) then
          keep(tonumber(flat[i + 1]), flat[i])
          found = found + 1
        end
      end
      if #flat < 2 * chunk then
        break
      end
      start = start + chunk
    end
  end
end
local rows = heap
if newest then
  table.sort(rows, function(x, y) return x[1] > y[1] end)
else
  table.sort(rows, function(x, y) return x[1] < y[1] end)
end
local out = {}
for i = offset + 1, math.min(offset + limit, #rows) do
  local id = rows[i][3] and string.sub(rows[i][2], 41) or rows[i][2]
  local flat = redis.call('HGETALL', jk(id))
  if #flat > 0 then
    table.insert(out, {id, flat})
  end
end
return cjson.encode({num(now), out})
