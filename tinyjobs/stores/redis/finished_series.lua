-- finished_series.lua: executions that ended in [since, now], counted per (bucket, outcome),
-- buckets of `step` seconds from `since`. Reads only.
-- For each outcome on record (the fields of P:dursum), P:ended:<outcome> holds its executions by
-- ended_at, so a bucket's count is one ZCOUNT between the bucket's bounds, whatever the number of
-- executions in it: a day of 10^6 executions at one-minute steps is about 1,440 ZCOUNTs per
-- outcome. Empty stretches are jumped over (the next entry after an empty bucket names the next
-- bucket to count), so a sparse window costs per non-empty bucket, not per bucket. When an
-- outcome's window holds few entries for its buckets (SCAN_PER_BUCKET), reading them is cheaper
-- than counting per bucket: they are read and bucketed here instead.
-- The bounds are exact: a bucket's lower bound is the smallest score whose bucket, by the
-- contract's formula computed in doubles as every store computes it, is that bucket or a later
-- one (found from since + k * step by moving a few doubles up or down), so each execution is
-- counted in the bucket the formula gives it, even a hair's breadth from a bound.
-- KEYS[1] = P:seq
-- Keys used (P = '{prefix}', one hash slot; layout and fields in _lib.lua): P:dursum,
--   P:ended:<outcome>, P:ended (the layout before; read while it exists) (reads only)
-- ARGV: now ('' = server TIME), since, step
-- Returns the JSON text of {{bucket start, outcome, n}, ...}.
local now = clock(ARGV[1])
local since, step = tonumber(ARGV[2]), tonumber(ARGV[3])
-- Entries read per bucket at or under which an outcome's window is read whole rather than
-- counted per bucket: one ZCOUNT costs about as much as reading and bucketing this many entries.
local SCAN_PER_BUCKET = 2

local function bucket(s)
  return math.floor((s - since) / step)
end

-- The next double above s (normal numbers; scores are epoch seconds).
local function up(s)
  if s == 0 then return 4.9406564584124654e-324 end
  local m, e = math.frexp(s)  -- s = m * 2^e, 0.5 <= |m| < 1
  local u = math.ldexp(1, e - 53)
  if m == -0.5 then u = u / 2 end
  return s + u
end

local function down(s)
  return -up(-s)
end

-- The smallest score in bucket k or later (bucket() never decreases as the score grows); made
-- once per bucket, whatever the number of outcomes.
local bounds = {}
local function lower(k)
  if bounds[k] then return bounds[k] end
  local s = since + k * step
  for _ = 1, 64 do
    if not (bucket(s) >= k) then break end
    s = down(s)
  end
  for _ = 1, 64 do
    if not (bucket(s) < k) then break end
    s = up(s)
  end
  bounds[k] = s
  return s
end

local counts, order = {}, {}
local function add(k, outcome, n)
  local key = k .. '\t' .. outcome
  if not counts[key] then
    counts[key] = {num(since + k * step), outcome, 0}
    table.insert(order, key)
  end
  counts[key][3] = counts[key][3] + n
end

local function first_at_or_after(key, from)
  local e = redis.call('ZRANGEBYSCORE', key, from, num(now), 'WITHSCORES', 'LIMIT', 0, 1)
  if #e == 0 then return nil end
  return tonumber(e[2])
end

local function count_buckets(key, outcome, first)
  local k = bucket(first)
  while true do
    local lo, hi = lower(k), lower(k + 1)
    local last = hi > now
    local n = redis.call('ZCOUNT', key, num(lo), last and num(now) or '(' .. num(hi))
    if n > 0 then
      add(k, outcome, n)
      k = k + 1
    elseif not last then
      local next_at = first_at_or_after(key, num(hi))
      if not next_at then break end
      k = bucket(next_at)
    end
    if last then break end
  end
end

local function read_entries(key, outcome)
  local e = redis.call('ZRANGEBYSCORE', key, num(since), num(now), 'WITHSCORES')
  for i = 2, #e, 2 do
    add(bucket(tonumber(e[i])), outcome, 1)
  end
end

local buckets = bucket(now) + 1
local outcomes, seen = {}, {}
for _, pair in ipairs(redis.call('HKEYS', P .. ':dursum')) do
  local outcome = string.match(pair, '\t([^\t]*)$')
  if not seen[outcome] then
    seen[outcome] = true
    table.insert(outcomes, outcome)
  end
end
for _, outcome in ipairs(outcomes) do
  local key = P .. ':ended:' .. outcome
  local total = redis.call('ZCOUNT', key, num(since), num(now))
  if total > 0 then
    if total <= SCAN_PER_BUCKET * buckets then
      read_entries(key, outcome)
    else
      count_buckets(key, outcome, first_at_or_after(key, num(since)))
    end
  end
end

-- Entries of the layout before P:ended:<outcome>, not yet moved (upgrade.lua): read as they are.
local ended = redis.call('ZRANGEBYSCORE', P .. ':ended', num(since), num(now), 'WITHSCORES')
for i = 1, #ended, 2 do
  add(bucket(tonumber(ended[i + 1])), string.match(ended[i], '\t[^\t]*\t(.*)$'), 1)
end

local out = {}
for _, key in ipairs(order) do table.insert(out, counts[key]) end
return cjson.encode(out)
