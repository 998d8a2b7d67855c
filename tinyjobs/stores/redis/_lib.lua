-- _lib.lua: helpers shared by every operation script; prepended to each script at load time,
-- after the prelude that scripts.py generates from tinyjobs/stores/rules.py (CANCELLED_WHILE_RUNNING,
-- ATTEMPTS_USED, DEPENDENCY_CANCELLED, DEPENDENCY_REASONS, EXECUTION_OUTCOMES, ...). The texts
-- come from there; the decisions below copy rules.py's functions, since Lua cannot call them,
-- and tests/contract/test_store_rules.py holds them to it.
--
-- KEYS[1] of every script is P .. ':seq', which names the prefix P = '{<prefix>}'. Every key
-- below starts with P, so all keys of one store hash to one slot (Redis Cluster-ready).
--
-- Key layout:
--   P:seq                  string  enqueue order counter (INCR)
--   P:job:<id>             hash    the job row (fields below)
--   P:steps:<id>           hash    step name -> JSON text
--   P:exec:<id>            list    executions, oldest first: a JSON start entry {a attempt,
--                                  h host, p pid, s started}, then an end entry {n ended,
--                                  o outcome, r error} once it ended
--   P:deps:<id>            set     ids of blocked jobs that run after <id>
--   P:q:<queue>:ready      zset    pending jobs found due, all scored 0, member = claim-order key
--   P:q:<queue>:sched      zset    pending jobs not yet found due, score = due, same member
--   P:q:<queue>:run        set     ids of running jobs
--   P:q:<queue>:grun       hash    group -> running jobs
--   P:q:<queue>:starts     zset    recent starts (score started_at) for `rate`; TTL = period
--   P:q:<queue>:gs:<group> zset    recent starts of one group for `group_rate`; TTL = period
--   P:q:<queue>:wake       list    wake-up tokens for wait() (at most 8): '1' claim, 's' scheduled
--   P:queues               set     names of queues that hold jobs
--   P:limited              hash    queue -> '1' while the last claim on it passed limits; only
--                                  these queues are woken when a lease ends (room under limits)
--   P:counts               hash    '<queue>\t<state>' -> jobs, for blocked/done/failed/cancelled
--   P:st:<state>           zset    ids by seq, for blocked/done/failed/cancelled
--   P:expiry               zset    final job ids by expires_at, for purge
--   P:leases               zset    running job ids by lease_expires, for reap
--   P:tok                  hash    the layout before: lease token -> job id, for tokens that do
--                                  not name their job (taken by an older version's claim).
--                                  Written by no script any more; read for such tokens, and
--                                  each entry goes when its lease ends
--   P:holders              set     holder ids that took leases: every holder with live leases,
--                                  and some whose last lease ended (a settlement leaves its
--                                  holder here, where removing it cost two commands a job and
--                                  the next claim a write to add it again). holders.lua lists
--                                  only those with a P:hold:<holder> set; reap and end_leases
--                                  remove the holders whose leases they end, purge the others
--   P:hold:<holder>        set     ids of the jobs one holder leases
--   P:keys                 hash    dedup key -> id of the live job holding it
--   P:cron                 hash    schedule -> last fired due time
--   P:lead                 hash    leadership name -> '<holder>\t<expires>'
--   P:created              zset    every job id by created_at (browse: newest first, ties by id)
--   P:kids:<id>            set     ids of every job enqueued after <id> (dependents)
--   P:ended:<outcome>      zset    '<id>\t<n>' by ended_at, one per ended execution with that
--                                  outcome (n: its end entry's place in P:exec:<id>), for
--                                  finished_series; the outcomes on record are those named
--                                  by P:dursum's fields
--   P:ended                zset    the layout before P:ended:<outcome>: '<id>\t<n>\t<outcome>' by
--                                  ended_at. Written by no script any more; RedisStore moves it
--                                  into P:ended:<outcome> on open (upgrade.lua), and until then
--                                  finished_series reads it and deletes remove from it
--   P:dur:<queue>\t<outcome> zset  '<id>\t<n>' by duration in seconds, for execution_stats
--   P:dursum               hash    '<queue>\t<outcome>' -> sum of those durations; its fields
--                                  are the pairs that have a P:dur zset (written and removed
--                                  with it)
--   P:durkeys              set     the layout before: those pairs once more, in a set of their
--                                  own. Written and read by no script any more (P:dursum's
--                                  fields name the same pairs); RedisStore deletes it on open
--   P:paused               set     paused queues (LIM-04): claim.lua takes none of their jobs
--   P:workers              hash    '<host>\t<pid>' -> JSON heartbeat {q, sl, b, sa, n seen_at}
--   P:q:<queue>:idle       hash    holder id -> '<expires>\t<token base>\t<lease>\t<hostname>\t<pid>':
--                                  a worker with room whose claim found nothing, for a queue
--                                  without limits (claim.lua), for IDLE_FOR seconds. A single
--                                  enqueue hands its job over to one (enqueue_one): used once;
--                                  a claim that fills the worker removes its registrations
--   P:hand:<holder>        list    jobs handed over to that holder and not popped yet, each as
--                                  claim.lua's reply gives a lease, with 1 for its fields written
--                                  ([id, row, 1, []]: no P:handed mark, see below), for its wait()
--                                  to pop. Popped is taken: the worker has it as a claim's reply,
--                                  and a worker that stops gives back what it popped and did not
--                                  start (give_back.lua). So ending the holder's leases (end_leases,
--                                  reap) gives back whole a job still on this list (never
--                                  popped: no attempt began) and ends the others on record
--   P:handed:<holder>      hash    the layout before: job id -> its P:hand entry, for jobs an older
--                                  version handed over (their entries have [] for the fields
--                                  written) and that holder's claim has not taken yet (it removes
--                                  the mark before the job starts). Written by no script any more;
--                                  a job marked here is given back whole as before
--
-- Job hash fields: t task, q queue, p payload, pr priority, d due, s seq, st stored state
-- (pending/blocked/running/done/failed/cancelled), a attempts, ma max_attempts, b attempt
-- budget, k key, g group, dd dedupe, kp keep, e error, r result, ca created_at, sa started_at,
-- fa finished_at, x expires_at, c cancel requested ('1'), tk token (see token_job), le lease_expires,
-- ls lease seconds, h holder id, af after (JSON array), w unmet parents, m member, hd '1'
-- when jobs run after it (P:deps:<id> may exist), hs '1' when it has steps.
-- Member (claim order, compared as bytes): 11 digits of 1e10 - priority, 17 digits of due in
-- microseconds, 12 digits of seq, then the id (from byte 41).
-- Numbers are written with %.17g so that Python reads back exactly the double Lua computed.

local INDEXED = {blocked = true, done = true, failed = true, cancelled = true}
-- Seconds a waiting worker's registration for handovers holds (P:q:<queue>:idle): a worker that
-- went away without ending its leases gets none after that. An idle worker claims more often
-- (the clock's claim, tinyjobs/worker.py TIMED_POLL), which registers it again.
local IDLE_FOR = 10
-- Prefix -> queue -> true for the P:q:<queue>:idle keys that may hold a registration: set by the
-- claim that registers, cleared by the enqueue that finds the key empty. The library's Lua state lives from one call to the next
-- (FUNCTION LOAD; see `begin`), so a single enqueue of a queue nobody waits on spares the read
-- of its registrations (about 10k instructions, 4 % of it). A hint only: a server restarted or
-- a library loaded again starts empty, and no handover is made until a worker registers again
-- (run as scripts by SHA, the state is new each run: never a handover).
local idle_hint = {}

-- The state of one run of an operation, started afresh by `begin` (the first thing every
-- operation does): as a function of the library (FUNCTION LOAD, scripts.py) an operation keeps
-- these upvalues from one call to the next, where a script (EVALSHA) made them anew each run.
local P  -- the prefix, '{<prefix>}', from KEYS[1] = P .. ':seq'
local wakes  -- queue -> wake-up tokens to push at flush
local ended  -- queue -> leases ended in this script: room under its limits, if any
-- Formatting a double costs thousands of instructions, and a script writes the same few (now,
-- a due time) several times: each text is made once per run.
local texts
local count_deltas  -- 'queue\tstate' -> change of that count, sent at flush
-- Writes to shared index keys after the first of their kind (later), sent once per key at the
-- end of the script (flush): false for a key written once so far, else the gathered command.
local batches, batch_order, holders_touched
local scheduled  -- queue -> true when a job was scheduled for later in this script

local function begin(keys)
  P = string.sub(keys[1], 1, -5)
  wakes, ended, texts, count_deltas, scheduled = {}, {}, {}, {}, {}
  batches, batch_order, holders_touched = {}, {}, {}
end

local function num(x)
  local t = texts[x]
  if t == nil then
    -- A whole number (a lease, a delay, a test's clock) as an integer: the same text as
    -- %.17g gives it, for about half the instructions.
    if x == math.floor(x) and x > -1e15 and x < 1e15 then
      t = string.format('%d', x)
    else
      t = string.format('%.17g', x)
    end
    texts[x] = t
  end
  return t
end

local function clock(v)
  if v == nil or v == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) + tonumber(t[2]) / 1000000
  end
  return tonumber(v)
end

local function jk(id)
  return P .. ':job:' .. id
end

local function qk(q, part)
  return P .. ':q:' .. q .. ':' .. part
end

local function load(id)
  local flat = redis.call('HGETALL', jk(id))
  if #flat == 0 then
    return nil, flat
  end
  local j = {}
  for i = 1, #flat, 2 do
    j[flat[i]] = flat[i + 1]
  end
  return j, flat
end

-- Only `fields` of a job hash (nil when the job does not exist): a script that needs a few
-- fields spares the copy of the rest (payload, result) into Lua, which HGETALL pays per field.
local function load_fields(id, fields)
  local values = redis.call('HMGET', jk(id), unpack(fields))
  local j, any = {}, false
  for i, f in ipairs(fields) do
    local v = values[i]
    if v then
      j[f], any = v, true
    end
  end
  if not any then
    return nil
  end
  return j
end

local function member(pri, due, seq, id)
  return string.format('%011d%017.0f%012d', 10000000000 - pri, due * 1000000, seq) .. id
end

-- Index of blocked and final jobs by state; the per-queue counts are summed and sent at flush.
local function index(state, q, seq, id, delta)
  if not INDEXED[state] then
    return
  end
  local ck = q .. '\t' .. state
  count_deltas[ck] = (count_deltas[ck] or 0) + delta
  if delta > 0 then
    redis.call('ZADD', P .. ':st:' .. state, seq, id)
  else
    redis.call('ZREM', P .. ':st:' .. state, id)
  end
end

-- One write to a shared index key (`cmd key a [b]`), gathered with the script's other writes of
-- the same command to the same key. The first goes to Redis at once: a lone job's script (the
-- commonest at a low rate) then pays one redis.call per key and a marker, where gathering every
-- write in a table and sending it at flush cost about 60k of the server's instructions a job
-- (enqueue, claim and settle-and-claim together: 6 % of them). The later ones are gathered and
-- sent once at flush, so a batch of N jobs costs two calls per key instead of N. Every index
-- written so is read by no script after it writes it (claim counts `run` before it takes
-- anything; flush checks P:hold:<holder> after sending), so sending the first write early
-- changes no result.
local function later(cmd, key, a, b)
  local slot = cmd .. key  -- (commands are upper-case words, keys start with '{')
  local entry = batches[slot]
  if entry == nil then
    batches[slot] = false
    if b == nil then redis.call(cmd, key, a) else redis.call(cmd, key, a, b) end
    return
  end
  if not entry then
    if b == nil then entry = {cmd, key, a} else entry = {cmd, key, a, b} end
    batches[slot] = entry
    batch_order[#batch_order + 1] = entry
  else
    entry[#entry + 1] = a
    if b ~= nil then entry[#entry + 1] = b end
  end
end

local function wake(q)
  wakes[q] = (wakes[q] or 0) + 1
end

-- Send the gathered writes; push at most 8 wake-up tokens per queue, whatever the number of
-- jobs that became due or leases that ended on limited queues (purge deletes the list with its
-- queue). A lease that ends on a queue without limits wakes nobody: a worker with free slots
-- claims from such a queue on its own cycle, so a wake-up would only cost every waiter a turn.
-- Tokens are '1' (jobs to claim now) or 's' (a job was scheduled for later: the waiter that pops
-- it reads the next due time again; one popping '1' keeps the one it read). Tokens are pushed,
-- then the list is cut to its newest 8 (one command where LLEN + RPUSH took two).
local function flush()
  for k = 1, #batch_order do
    local entry = batch_order[k]
    local n = #entry
    if n <= 4002 then
      redis.call(unpack(entry))
    else
      for i = 3, n, 4000 do
        redis.call(entry[1], entry[2], unpack(entry, i, math.min(n, i + 3999)))
      end
    end
  end
  batches, batch_order = {}, {}
  for ck, delta in pairs(count_deltas) do
    if delta ~= 0 and redis.call('HINCRBY', P .. ':counts', ck, string.format('%d', delta)) <= 0 then
      redis.call('HDEL', P .. ':counts', ck)
    end
  end
  count_deltas = {}
  for h in pairs(holders_touched) do
    if redis.call('EXISTS', P .. ':hold:' .. h) == 0 then
      redis.call('SREM', P .. ':holders', h)
    end
  end
  holders_touched = {}
  for q, n in pairs(ended) do
    if redis.call('HEXISTS', P .. ':limited', q) == 1 then
      wakes[q] = (wakes[q] or 0) + n
    end
  end
  ended = {}
  for q, n in pairs(wakes) do
    local w = qk(q, 'wake')
    local tokens = {}
    for i = 1, math.min(n, 8) do
      tokens[i] = '1'
    end
    if redis.call('RPUSH', w, unpack(tokens)) > 8 then
      redis.call('LTRIM', w, -8, -1)
    end
  end
  for q in pairs(scheduled) do
    local w = qk(q, 'wake')
    if redis.call('RPUSH', w, 's') > 8 then
      redis.call('LTRIM', w, -8, -1)
    end
  end
  wakes, scheduled = {}, {}
end

-- Make a job pending with this due time: into `ready` when due, else into `sched`. `written`:
-- the member, when the caller wrote the row's fields (st, d, m) itself (enqueue).
local function place(id, j, due, now, written)
  local m = written or member(tonumber(j.pr), due, tonumber(j.s), id)
  j.st, j.d, j.m = 'pending', num(due), m
  if not written then
    redis.call('HSET', jk(id), 'st', 'pending', 'd', j.d, 'm', m)
  end
  if due <= now then
    redis.call('ZADD', qk(j.q, 'ready'), '0', m)
    wake(j.q)
  else
    redis.call('ZADD', qk(j.q, 'sched'), j.d, m)
    scheduled[j.q] = true
  end
end

local function unplace(j)
  redis.call('ZREM', qk(j.q, 'ready'), j.m)
  redis.call('ZREM', qk(j.q, 'sched'), j.m)
end

local function release_key(id, j)
  if j.k and j.k ~= '' and redis.call('HGET', P .. ':keys', j.k) == id then
    redis.call('HDEL', P .. ':keys', j.k)
  end
end

local finalize

-- Blocked jobs that run after `id` (done): a job whose parents are all done becomes due now.
local function release_dependents(id, now)
  local dk = P .. ':deps:' .. id
  for _, child in ipairs(redis.call('SMEMBERS', dk)) do
    local cj = load(child)
    if cj and cj.st == 'blocked' and redis.call('HINCRBY', jk(child), 'w', -1) <= 0 then
      index('blocked', cj.q, cj.s, child, -1)
      place(child, cj, math.max(now, tonumber(cj.d)), now)
    end
  end
  redis.call('DEL', dk)
end

-- Blocked jobs that run after `id`, which ended in `state` (failed or cancelled), are cancelled
-- on record, recursively (rules.dependency_error).
local function cancel_dependents(id, state, now)
  local err = string.format(DEPENDENCY_CANCELLED, id, DEPENDENCY_REASONS[state])
  local dk = P .. ':deps:' .. id
  local children = redis.call('SMEMBERS', dk)
  redis.call('DEL', dk)
  for _, child in ipairs(children) do
    local cj = load(child)
    if cj and cj.st == 'blocked' then
      index('blocked', cj.q, cj.s, child, -1)
      finalize(child, cj, 'cancelled', err, now)
    end
  end
end

-- Put a job (not pending, not running any more) in a final state and expire it later; `result`
-- (done only) is written with it. `j` is the loaded row (its `e` says whether done clears one).
finalize = function(id, j, state, err, now, result)
  local x = now + tonumber(state == 'done' and j.dd or j.kp)
  j.st = state
  if err then
    redis.call('HSET', jk(id), 'st', state, 'fa', num(now), 'x', num(x), 'e', err)
  elseif result then
    redis.call('HSET', jk(id), 'st', state, 'fa', num(now), 'x', num(x), 'r', result)
  else
    redis.call('HSET', jk(id), 'st', state, 'fa', num(now), 'x', num(x))
  end
  later('ZADD', P .. ':expiry', num(x), id)
  index(state, j.q, j.s, id, 1)
  release_key(id, j)
  if state == 'done' then
    if j.e then redis.call('HDEL', jk(id), 'e') end
    if j.hd then release_dependents(id, now) end
  elseif j.hd then
    cancel_dependents(id, state, now)
  end
end

-- Whether P:ended (the layout before P:ended:<outcome>) still exists: read once per script, by
-- the first execution it forgets (a script that forgets none pays nothing).
local legacy_ended = nil

-- The execution-stats entries of one ended execution (see close_exec).
local function exec_stats(id, q, n, outcome, started, ended_at, sign)
  local pair = q .. '\t' .. outcome
  local d = math.max(ended_at - started, 0)
  local m = id .. '\t' .. n
  if sign > 0 then
    redis.call('ZADD', P .. ':ended:' .. outcome, num(ended_at), m)
    redis.call('ZADD', P .. ':dur:' .. pair, num(d), m)
    redis.call('HINCRBYFLOAT', P .. ':dursum', pair, num(d))
  else
    redis.call('ZREM', P .. ':ended:' .. outcome, m)
    if legacy_ended == nil then
      legacy_ended = redis.call('EXISTS', P .. ':ended') == 1
    end
    if legacy_ended then
      redis.call('ZREM', P .. ':ended', m .. '\t' .. outcome)
    end
    redis.call('ZREM', P .. ':dur:' .. pair, m)
    if redis.call('EXISTS', P .. ':dur:' .. pair) == 0 then
      redis.call('HDEL', P .. ':dursum', pair)
    else
      redis.call('HINCRBYFLOAT', P .. ':dursum', pair, num(-d))
    end
  end
end

-- Take a job's ended executions out of the stats indexes (its executions are going).
local function forget_executions(id, q)
  local started = nil
  for n, text in ipairs(redis.call('LRANGE', P .. ':exec:' .. id, 0, -1)) do
    local e = cjson.decode(text)
    if e.s then
      started = tonumber(e.s)
    elseif e.n and started then
      exec_stats(id, q, n, e.o, started, tonumber(e.n), -1)
    end
  end
end

-- Remove a job that is not running, with its steps, executions and index entries.
local function delete(id, j)
  if j.st == 'pending' then
    unplace(j)
  end
  index(j.st, j.q, j.s, id, -1)
  redis.call('ZREM', P .. ':expiry', id)
  release_key(id, j)
  if j.af then
    for _, parent in ipairs(cjson.decode(j.af)) do
      redis.call('SREM', P .. ':deps:' .. parent, id)
      redis.call('SREM', P .. ':kids:' .. parent, id)
    end
  end
  forget_executions(id, j.q)
  redis.call('ZREM', P .. ':created', id)
  redis.call('DEL', jk(id), P .. ':steps:' .. id, P .. ':exec:' .. id, P .. ':kids:' .. id)
end

-- The id of the job a lease token names, or nil. A token is the claim's random base (hex), the
-- lease's place in that claim (hex), '-' and the job's id: renew and save_step read the job
-- from the token itself, where a hash of every live token (P:tok) cost a write when a lease was
-- taken and another when it ended. A token without '-' was taken by an older version, whose
-- claim recorded it in P:tok.
local function token_job(tk)
  local at = string.find(tk, '-', 1, true)
  if at then
    return string.sub(tk, at + 1)
  end
  return redis.call('HGET', P .. ':tok', tk)
end

-- Drop the live lease of a running job from every index (the shared ones at flush).
local function clear_lease(id, j)
  later('SREM', qk(j.q, 'run'), id)
  if j.g then
    local gk = qk(j.q, 'grun')
    if redis.call('HINCRBY', gk, j.g, '-1') <= 0 then
      redis.call('HDEL', gk, j.g)
    end
  end
  later('ZREM', P .. ':leases', id)
  if not string.find(j.tk, '-', 1, true) then
    later('HDEL', P .. ':tok', j.tk)  -- a lease an older version took (see token_job)
  end
  later('SREM', P .. ':hold:' .. j.h, id)
  redis.call('HDEL', jk(id), 'tk', 'le', 'h')
  ended[j.q] = (ended[j.q] or 0) + 1  -- room under the queue's limits, if it has any (flush)
end

-- An execution is a start entry {a, h, p, s} pushed by claim, then an end entry {n, o[, r]}.
-- The start time is the running job's `sa`, which claim writes with the start entry's `s` (the
-- same text): reading it from the row the caller loaded spares a read and a decode of the list.
local function close_exec(id, j, now, outcome, err)
  local xk = P .. ':exec:' .. id
  local started = tonumber(j.sa)
  if started == nil then  -- not expected (claim writes both); the start entry says it too
    started = tonumber(cjson.decode(redis.call('LINDEX', xk, -1)).s)
  end
  local n = redis.call('RPUSH', xk, cjson.encode({n = num(now), o = outcome, r = err}))
  exec_stats(id, j.q, n, outcome, started, now, 1)
end

-- A lease that ended without settlement (reap: OUTCOME_LEASE_EXPIRED, end_leases:
-- OUTCOME_WORKER_LOST): rules.lease_ended.
local function end_lease(id, j, outcome, now)
  close_exec(id, j, now, outcome, nil)
  clear_lease(id, j)
  holders_touched[j.h] = true  -- a holder that lost its last lease leaves P:holders (flush)
  if j.c == '1' then
    finalize(id, j, 'cancelled', CANCELLED_WHILE_RUNNING, now)
  elseif tonumber(j.a) >= tonumber(j.ma) then
    finalize(id, j, 'failed', string.format(ATTEMPTS_USED, outcome, j.a, j.ma), now)
  else
    place(id, j, tonumber(j.d), now)
  end
end

-- The entry of job `id` on P:hand:<h> (handed over to h and not popped yet), or nil. The list
-- holds 8 entries at most (enqueue_one): a rare path (reap, end_leases) reads it whole.
local function hand_entry(h, id)
  local head = cjson.encode(id) .. ','
  for _, entry in ipairs(redis.call('LRANGE', P .. ':hand:' .. h, 0, -1)) do
    if string.sub(entry, 2, #head + 1) == head then
      return entry
    end
  end
  return nil
end

-- Give back a job handed over to its holder j.h and never started: not popped (its `entry` on
-- P:hand:<holder>, removed here; nil when the caller took it off already), popped and given
-- back by its worker (give_back.lua), or marked in P:handed by an older version. No worker
-- started it, so no attempt began. Its lease, its attempt and the execution's start entry (the
-- last of P:exec:<id>: only a settlement, which needs the token, adds after it) are undone and
-- the job waits again at its due time, as before the handover.
local function undo_handover(id, j, now, entry)
  if entry then
    redis.call('LREM', P .. ':hand:' .. j.h, 1, entry)
  end
  clear_lease(id, j)
  holders_touched[j.h] = true
  redis.call('RPOP', P .. ':exec:' .. id)
  j.a = string.format('%d', tonumber(j.a) - 1)
  redis.call('HSET', jk(id), 'a', j.a)
  place(id, j, tonumber(j.d), now)
end

-- Every job on P:hand:<h> (handed over to holder h, never popped: no attempt began) given back
-- whole, as undo_handover does; the list itself is left to the caller. How many jobs.
local function undo_hand_list(h, now)
  local n = 0
  for _, entry in ipairs(redis.call('LRANGE', P .. ':hand:' .. h, 0, -1)) do
    local id = cjson.decode(entry)[1]
    local j = load(id)
    if j and j.st == 'running' and j.h == h then
      undo_handover(id, j, now, nil)
      n = n + 1
    end
  end
  return n
end

-- A job an older version handed over to holder h (P:handed:<h>, see the layout) and no claim
-- took: given back whole, with its entry if still on P:hand:<h>. Whether it was.
local function undo_legacy_handover(id, j, h, now)
  local hk = P .. ':handed:' .. h
  local entry = redis.call('HGET', hk, id)
  if entry == false then return false end
  redis.call('HDEL', hk, id)
  undo_handover(id, j, now, entry)
  return true
end

-- A worker waiting with room for queue `q` that a job due now can be handed to, or nil: only
-- when nothing of the queue is due before it (its `ready` empty, nothing due in `sched`: the
-- handed job is the one a claim would take first) and the queue is not paused. The
-- registration picked is used up (a stale one too); the others stay.
local function idle_taker(q, now)
  local hints = idle_hint[P]
  if not (hints and hints[q]) then return nil end  -- nobody registered since the library loaded
  local ik = qk(q, 'idle')
  local pick = redis.call('HRANDFIELD', ik, 1, 'WITHVALUES')
  if #pick == 0 then hints[q] = nil end
  if #pick == 0 or redis.call('EXISTS', qk(q, 'ready')) == 1
    or redis.call('ZCOUNT', qk(q, 'sched'), '-inf', num(now)) > 0 then
    return nil
  end
  redis.call('HDEL', ik, pick[1])
  local exp, base, lease, host, pid = string.match(pick[2], '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
  if not exp or tonumber(exp) <= now or redis.call('SISMEMBER', P .. ':paused', q) == 1 then
    return nil
  end
  return {h = pick[1], base = base, lease = tonumber(lease), host = host, pid = pid}
end

-- Which parent (if any) already failed or was cancelled, and which ones are not done yet
-- (rules.initial_state).
local function parents_of(after)
  local unmet, why, blocker = {}, nil, nil
  for _, pid in ipairs(after) do
    local pst = redis.call('HGET', jk(pid), 'st')
    if DEPENDENCY_REASONS[pst] and not why then
      why, blocker = DEPENDENCY_REASONS[pst], pid
    elseif pst ~= 'done' then
      table.insert(unmet, pid)
    end
  end
  return unmet, why, blocker
end

-- Add one job. `a` = {id, task, queue, payload, priority, delay, at, key, group, after, max
-- attempts, dedupe, keep} ('' = none). Returns {'0', id, flat hash} for an existing job, or
-- {'1', id, state, due, seq, error}. `hand`: a job due now without parents may be handed over
-- to a waiting worker (idle_taker): leased to it in this step, as its claim would lease it (the
-- row, the lease's indexes, the execution's start entry), marked in P:handed:<holder> and pushed
-- on P:hand:<holder>, which the holder's wait() pops: its claim returns it without a round trip
-- (RedisStore.claim). The reply still says 'pending': so it was, within this atomic step.
local function enqueue_one(a, now, hand)
  local id, q, key = a[1], a[3], a[8]
  local ex, flat = load(id)
  if ex then
    if ex.st ~= 'failed' and ex.st ~= 'cancelled' and not (ex.st == 'done' and tonumber(ex.x) <= now) then
      return {'0', id, flat}
    end
    delete(id, ex)
  end
  if key ~= '' then
    local other = redis.call('HGET', P .. ':keys', key)
    if other then
      return {'0', other, redis.call('HGETALL', jk(other))}
    end
  end
  local seq = redis.call('INCR', P .. ':seq')
  local due = (a[7] ~= '') and tonumber(a[7]) or now + tonumber(a[6])
  local m = member(tonumber(a[5]), due, seq, id)
  local w = hand and a[10] == '' and due <= now and idle_taker(q, now)
  local f
  if w then
    local le = now + w.lease
    f = {'t', a[2], 'q', q, 'p', a[4], 'pr', a[5], 's', string.format('%d', seq), 'a', '1', 'ma', a[11], 'b', a[11],
      'dd', a[12], 'kp', a[13], 'ca', num(now), 'd', num(due), 'st', 'running', 'm', m, 'sa', num(now),
      'tk', w.base .. '0000-' .. id, 'le', num(le), 'ls', num(w.lease), 'h', w.h}
    w.le = le
  else
    f = {'t', a[2], 'q', q, 'p', a[4], 'pr', a[5], 's', string.format('%d', seq), 'a', '0', 'ma', a[11], 'b', a[11],
      'dd', a[12], 'kp', a[13], 'ca', num(now), 'd', num(due), 'st', 'pending', 'm', m}
  end
  local j = {q = q, pr = a[5], s = seq, dd = a[12], kp = a[13]}
  if key ~= '' then table.insert(f, 'k'); table.insert(f, key) end
  if a[9] ~= '' then table.insert(f, 'g'); table.insert(f, a[9]) end
  if a[10] ~= '' then table.insert(f, 'af'); table.insert(f, a[10]) end
  redis.call('HSET', jk(id), unpack(f))
  if w then
    -- The lease's indexes, as claim.lua writes them for a queue without limits.
    redis.call('SADD', P .. ':queues', q)
    later('ZADD', P .. ':created', num(now), id)
    if key ~= '' then redis.call('HSET', P .. ':keys', key, id) end
    later('SADD', qk(q, 'run'), id)
    if a[9] ~= '' then redis.call('HINCRBY', qk(q, 'grun'), a[9], '1') end
    later('ZADD', P .. ':leases', num(w.le), id)
    later('SADD', P .. ':hold:' .. w.h, id)
    redis.call('SADD', P .. ':holders', w.h)
    redis.call('RPUSH', P .. ':exec:' .. id,
      '{"a":1,"h":' .. cjson.encode(w.host) .. ',"p":' .. w.pid .. ',"s":"' .. num(now) .. '"}')
    -- The job itself, as claim.lua's reply gives a lease, for the holder's wait() to pop: popped,
    -- it is the worker's (no mark to remove before it starts: see P:hand in the layout). 1 in
    -- place of the fields written tells a worker so (an older version's entry has []).
    local hk = P .. ':hand:' .. w.h
    local n = redis.call('RPUSH', hk, '[' .. cjson.encode(id) .. ',' .. cjson.encode(f) .. ',1,[]]')
    if n > 8 then
      -- At most 8 wait on a holder (one that stopped waiting has one at most): the oldest go
      -- back whole, as if never handed over.
      for _, old in ipairs(redis.call('LPOP', hk, n - 8)) do
        local oid = cjson.decode(old)[1]
        local oj = load(oid)
        if oj and oj.st == 'running' and oj.h == w.h then undo_handover(oid, oj, now, nil) end
      end
    end
    return {'1', id, 'pending', num(due), seq, ''}
  end
  redis.call('SADD', P .. ':queues', q)
  later('ZADD', P .. ':created', num(now), id)
  if a[10] ~= '' then
    for _, parent in ipairs(cjson.decode(a[10])) do
      redis.call('SADD', P .. ':kids:' .. parent, id)
    end
  end
  local unmet, why, blocker = parents_of((a[10] ~= '') and cjson.decode(a[10]) or {})
  if why then
    local err = string.format(DEPENDENCY_CANCELLED, blocker, why)
    finalize(id, j, 'cancelled', err, now)
    return {'1', id, 'cancelled', num(due), seq, err}
  end
  if key ~= '' then
    redis.call('HSET', P .. ':keys', key, id)
  end
  if #unmet > 0 then
    for _, pid in ipairs(unmet) do
      redis.call('SADD', P .. ':deps:' .. pid, id)
      redis.call('HSET', jk(pid), 'hd', '1')
    end
    redis.call('HSET', jk(id), 'st', 'blocked', 'w', #unmet)
    index('blocked', q, seq, id, 1)
    return {'1', id, 'blocked', num(due), seq, ''}
  end
  place(id, j, due, now, m)
  return {'1', id, 'pending', num(due), seq, ''}
end
