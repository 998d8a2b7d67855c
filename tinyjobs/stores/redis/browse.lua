-- browse.lua: one step of a browse page: walk P:created newest first from a position, keep
-- the jobs that match the filter, stop at `want` matches or after `budget` rows (so that one
-- call never holds the server long; the caller calls again from the returned position).
-- A state filter on blocked/done/failed/cancelled with few jobs in that state reads its
-- P:st:<state> index instead and sorts it (exact, and fast for the usual "failed" page).
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:created,
--   P:st:<state>, P:job:<id> (reads only)
-- ARGV: now ('' = server TIME), after created_at ('' = from the newest), after id, want,
--   budget, state ('' = any, else a reported state), queue, task, text ('' = any)
-- Returns the JSON text of {now, {{id, flat job hash}, ...}, last created_at scanned, last id
--   scanned, '1' when the walk reached the oldest job}.
local now = clock(ARGV[1])
local after_at, after_id = ARGV[2], ARGV[3]
local want, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local state, queue, task, text = ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local SMALL = 5000

local function matches(id, j)
  if queue ~= '' and j.q ~= queue then return false end
  if task ~= '' and j.t ~= task then return false end
  if state ~= '' then
    local st = j.st
    if st == 'pending' then st = (tonumber(j.d) > now) and 'scheduled' or 'waiting' end
    if st ~= state then return false end
  end
  if text ~= '' then
    return string.sub(id, 1, #text) == text or string.find(j.p, text, 1, true) ~= nil
      or (j.e ~= nil and string.find(j.e, text, 1, true) ~= nil)
  end
  return true
end

local function before(at, id)  -- (at, id) comes after the position in newest-first order
  if after_at == '' then return true end
  local a = tonumber(after_at)
  return at < a or (at == a and id < after_id)
end

local out = {}
if INDEXED[state] and redis.call('ZCARD', P .. ':st:' .. state) <= SMALL then
  local rows = {}
  for _, id in ipairs(redis.call('ZRANGE', P .. ':st:' .. state, 0, -1)) do
    local j, flat = load(id)
    if j and before(tonumber(j.ca), id) and matches(id, j) then
      table.insert(rows, {tonumber(j.ca), id, flat})
    end
  end
  table.sort(rows, function(a, b) return a[1] > b[1] or (a[1] == b[1] and a[2] > b[2]) end)
  for i = 1, math.min(#rows, want) do
    table.insert(out, {rows[i][2], rows[i][3]})
  end
  return cjson.encode({num(now), out, '', '', '1'})
end

local ck = P .. ':created'
local last_at, last_id, scanned = after_at, after_id, 0
-- Rows with the position's own created_at and a smaller id come first (ties are rare).
local pending = {}
if after_at ~= '' then
  local same = redis.call('ZRANGEBYSCORE', ck, after_at, after_at)
  for i = #same, 1, -1 do
    if same[i] < after_id then table.insert(pending, same[i]) end
  end
end
local offset, top = 0, (after_at == '') and '+inf' or ('(' .. after_at)
local exhausted = false
while #out < want and scanned < budget do
  if #pending == 0 then
    local ids = redis.call('ZREVRANGEBYSCORE', ck, top, '-inf', 'WITHSCORES', 'LIMIT', offset, 200)
    if #ids == 0 then
      exhausted = true
      break
    end
    offset = offset + #ids / 2
    for i = 1, #ids, 2 do table.insert(pending, ids[i]) end
  end
  local id = table.remove(pending, 1)
  scanned = scanned + 1
  local j, flat = load(id)
  if j then
    last_at, last_id = j.ca, id
    if matches(id, j) then table.insert(out, {id, flat}) end
  end
end
return cjson.encode({num(now), out, last_at, last_id, exhausted and '1' or ''})
