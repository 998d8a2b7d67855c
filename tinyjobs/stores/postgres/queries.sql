-- The statements of the PostgreSQL store, one `-- name: <method>` block each.
-- Placeholders in braces are filled with psycopg.sql (quoted identifiers, column lists);
-- %(name)s are query parameters, and %(name)b arrays sent in binary (psycopg dumps a list
-- several times faster so than as text). Each block starts from `t`, the operation's clock:
-- the caller's `now` when given, else the server's transaction time (CLK-01).
-- The rules every store follows live in tinyjobs/stores/rules.py: their texts come from there
-- as placeholders (`{cancelled_while_running}`, `{execution_outcomes}`, ...); the decisions
-- (settle's new_state, end_leases' state, the reported state of `jobs` and `counts`) are SQL
-- copies of its functions, held to them by tests/contract/test_store_rules.py.

-- name: clock
SELECT extract(epoch FROM clock_timestamp())::float8

-- name: raise_sync_commit
SELECT set_config('synchronous_commit', 'on', true)
WHERE current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')

-- name: generic_plans
-- For the worker's cycle: it runs the same few statements over and over with other arrays, and
-- PostgreSQL's default chose custom plans for some, planned anew at each run; the generic plan
-- runs about as fast without that cost (benchmarks/store_cycle.py: +15-45 %). For this
-- transaction alone (is_local), so a pooled session is left as it was. JIT off with it: a generic
-- plan is costed from the table's size, and at 10^6 rows the claim's estimate passes
-- jit_above_cost, so every claim compiled ~70 functions (55-115 ms) for a 3 ms plan
-- (benchmarks/scale.py; docs/measured.md "Flat as the store grows").
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true)

-- name: enqueue
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
src AS (
    SELECT s.*, nextval({seq}) AS seq FROM (
        SELECT * FROM unnest(
            %(ids)b::text[], %(tasks)b::text[], %(queues)b::text[], %(payloads)b::text[],
            %(priorities)b::int[], %(delays)b::float8[], %(ats)b::float8[], %(keys)b::text[],
            %(groups)b::text[], %(afters)b::text[], %(max_attempts)b::int[],
            %(dedupes)b::float8[], %(keeps)b::float8[], %(states)b::text[], %(errors)b::text[]
        ) WITH ORDINALITY AS s(id, task, queue, payload, priority, delay, at, key, grp, after_json,
                               max_attempts, dedupe, keep, state, error, ord)
        ORDER BY s.ord
    ) s
),
ins AS (
    {insert_job}
    SELECT src.id, src.task, src.queue, src.payload, src.priority,
        COALESCE(src.at, t.now + src.delay), src.seq, src.state, 0, src.max_attempts,
        src.max_attempts, src.key, src.grp,
        CASE WHEN src.after_json IS NULL THEN ARRAY[]::text[]
             ELSE ARRAY(SELECT json_array_elements_text(src.after_json::json)) END,
        src.dedupe, src.keep, src.error, NULL, t.now, NULL,
        CASE WHEN src.state = 'cancelled' THEN t.now END,
        CASE WHEN src.state = 'cancelled' THEN t.now + src.keep END,
        false, NULL, NULL, NULL, NULL, NULL
    FROM src, t
    WHERE src.key IS NULL OR NOT EXISTS (
        SELECT 1 FROM {jobs} k
        WHERE k.key = src.key AND k.state IN ('pending', 'blocked', 'running'))
    ORDER BY src.ord
    {upsert_job}
)
SELECT ins.*, t.now,
    (SELECT count(pg_notify(%(channel)s, q.queue))
     FROM (SELECT DISTINCT queue FROM ins) q WHERE %(notify)s) AS notified
FROM ins, t

-- name: enqueue_one
-- One job without parents (the common single enqueue): plain parameters instead of arrays,
-- so the statement plans and runs in a fraction of the batch form's time. Same rules, except
-- that it never replaces: an id held by a final job past its window adds nothing here, and
-- the caller goes the batch way, which replaces it and forgets its past (`forget`). Replacing
-- here would cost every single enqueue the planning of the forget and counter statements
-- (benchmarks/pg_store_cpu.py single: server CPU per job +14 percent) for a rare case.
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
ins AS (
    {insert_job}
    SELECT %(id)s, %(task)s, %(queue)s, %(payload)s, %(priority)s,
        COALESCE(%(at)s::float8, t.now + %(delay)s::float8), nextval({seq}), 'pending', 0,
        %(max_attempts)s, %(max_attempts)s, %(key)s::text, %(group)s::text, ARRAY[]::text[],
        %(dedupe)s, %(keep)s, NULL, NULL, t.now, NULL, NULL, NULL, false, NULL, NULL, NULL,
        NULL, NULL
    FROM t
    WHERE %(key)s::text IS NULL OR NOT EXISTS (
        SELECT 1 FROM {jobs} k
        WHERE k.key = %(key)s::text AND k.state IN ('pending', 'blocked', 'running'))
    ON CONFLICT (id) DO NOTHING
    RETURNING {jcols}, false AS replaced
)
SELECT ins.*, t.now FROM ins, t

-- name: insert_job
-- Fragment: the column list every enqueue writes.
INSERT INTO {jobs} AS j (id, task, queue, payload, priority, due, seq, state, attempts,
    max_attempts, attempt_budget, key, grp, after_ids, dedupe, keep, error, result,
    created_at, started_at, finished_at, expires_at, cancel_requested, token, last_token,
    lease_expires, lease_seconds, holder)

-- name: upsert_job
-- Fragment: an id held by a final job past its window is replaced (JOB-09); otherwise the
-- row is not written and not returned.
ON CONFLICT (id) DO UPDATE SET task = EXCLUDED.task, queue = EXCLUDED.queue,
    payload = EXCLUDED.payload, priority = EXCLUDED.priority, due = EXCLUDED.due,
    seq = EXCLUDED.seq, state = EXCLUDED.state, attempts = 0,
    max_attempts = EXCLUDED.max_attempts, attempt_budget = EXCLUDED.attempt_budget,
    key = EXCLUDED.key, grp = EXCLUDED.grp, after_ids = EXCLUDED.after_ids,
    dedupe = EXCLUDED.dedupe, keep = EXCLUDED.keep, error = EXCLUDED.error, result = NULL,
    created_at = EXCLUDED.created_at, started_at = NULL,
    finished_at = EXCLUDED.finished_at, expires_at = EXCLUDED.expires_at,
    cancel_requested = false, token = NULL, last_token = NULL, lease_expires = NULL,
    lease_seconds = NULL, holder = NULL
WHERE j.state IN ('failed', 'cancelled')
   OR (j.state = 'done' AND j.expires_at <= EXCLUDED.created_at)
RETURNING {jcols}, (j.xmax <> 0) AS replaced

-- name: transaction_clock
-- The clock of enqueue's `t` when no `now` is given: the transaction's start time.
SELECT extract(epoch FROM now())::float8

-- name: copy_jobs
-- bulk.py: a batch of new pending jobs in one binary stream; seq by the column's default (m004).
COPY {jobs} (id, task, queue, payload, priority, due, state, max_attempts, attempt_budget, grp,
    dedupe, keep, created_at) FROM STDIN (FORMAT BINARY)

-- name: enqueue_existing
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT {cols}, t.now,
    state IN ('pending', 'blocked', 'running') OR (state = 'done' AND expires_at > t.now)
        AS holds_id  -- rules.holds_id
FROM {jobs}, t
WHERE id = ANY(%(ids)b::text[])
   OR (key = ANY(%(keys)b::text[]) AND state IN ('pending', 'blocked', 'running'))

-- name: enqueue_parents
SELECT id, state FROM {jobs} WHERE id = ANY(%(ids)b::text[]) FOR SHARE

-- name: enqueue_deps
INSERT INTO {deps} (parent_id, job_id)
SELECT * FROM unnest(%(parents)b::text[], %(children)b::text[])
ON CONFLICT DO NOTHING

-- name: forget
-- The steps, executions and dependencies of jobs that were deleted or replaced, the executions
-- taken off the counters (m005). Returns the (minute, outcome) of the ended executions it took
-- off, for purge's sweep_minutes.
WITH s AS (DELETE FROM {steps} WHERE job_id = ANY(%(ids)b::text[])),
e AS (
    DELETE FROM {executions} WHERE job_id = ANY(%(ids)b::text[])
    RETURNING queue, outcome, ended_at, greatest(ended_at - started_at, 0) AS d
),
dd AS (DELETE FROM {deps} WHERE job_id = ANY(%(ids)b::text[])),
ended AS (SELECT e.*, -1 AS sign FROM e),
{tally}
SELECT DISTINCT minute, outcome FROM tallied

-- name: tally
-- Fragment, the tail of a WITH list: add `ended` (queue, outcome, ended_at, d the duration,
-- sign +1 for an execution that ended, -1 for an ended one deleted; open ones are skipped) to
-- the counters of m005, in this backend's shard (so that concurrent settlements never wait on
-- each other's counter rows). One upsert per group, in key order (two backends of one shard
-- lock their common rows in the same order). upto and minute: m005's rules, to the character.
tallied AS (
    SELECT queue, outcome, sign, d,
        CASE WHEN d <= 1 THEN ceil(d * 1000) / 1000
             WHEN d <= 10 THEN ceil(d * 100) / 100
             ELSE ceil(d) END AS upto,
        CASE WHEN m > ended_at THEN m - 60 WHEN m + 60 <= ended_at THEN m + 60 ELSE m END
            AS minute
    FROM (SELECT ended.*, floor(ended_at / 60) * 60 AS m FROM ended
          WHERE ended_at IS NOT NULL AND outcome IS NOT NULL) x
),
tally_stats AS (
    INSERT INTO {exec_stats} AS c (queue, outcome, upto, shard, n, seconds)
    SELECT queue, outcome, upto, mod(pg_backend_pid(), 16), sum(sign), sum(sign * d)
    FROM tallied GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (queue, outcome, upto, shard)
    DO UPDATE SET n = c.n + EXCLUDED.n, seconds = c.seconds + EXCLUDED.seconds
),
tally_minutes AS (
    INSERT INTO {exec_minutes} AS c (minute, outcome, shard, n)
    SELECT minute, outcome, mod(pg_backend_pid(), 16), sum(sign)
    FROM tallied GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (minute, outcome, shard) DO UPDATE SET n = c.n + EXCLUDED.n
)

-- name: sweep_minutes
-- After purge's forget: delete the exec_minutes rows of these (minute, outcome) whose shards
-- add up to 0, so that the table holds the minutes on record, not every minute ever. Only rows
-- it could lock without waiting (SKIP LOCKED: never a deadlock with a settlement or another
-- purge), and only a set of locked rows whose n add up to 0: whatever it skips or another
-- backend inserts meanwhile, the sums stay what they were. A key left over goes at a later
-- purge of its minute, or stays as zeros (harmless).
WITH k AS (SELECT * FROM unnest(%(minutes)b::float8[], %(outcomes)b::text[]) AS k(minute, outcome)),
held AS MATERIALIZED (
    SELECT c.minute, c.outcome, c.shard, c.n FROM {exec_minutes} c
    WHERE (c.minute, c.outcome) IN (SELECT minute, outcome FROM k)
    FOR UPDATE OF c SKIP LOCKED
),
gone AS (SELECT minute, outcome FROM held GROUP BY 1, 2 HAVING sum(n) = 0)
DELETE FROM {exec_minutes} c USING held h JOIN gone g USING (minute, outcome)
WHERE c.minute = h.minute AND c.outcome = h.outcome AND c.shard = h.shard

-- name: claim_free
-- The claim when no queue has a limit, as m007's function (pause locks, due jobs locked, then
-- the leases only when it locked some): a claim that finds nothing costs one index probe, where
-- `claim` starts its whole plan. Sent alone it is its own implicit transaction (store.claim);
-- settle_and_claim sends it when its previous claim found fewer jobs than it asked for (the
-- queue ran dry: the next one likely finds nothing), else `claim`, which costs the server less
-- when it does claim (one statement and no PL/pgSQL). Its columns: COLUMNS, then CLAIMED's tail.
SELECT {ccols}, (c.claimed).token, (c.claimed).lease_seconds, c.clock AS now,
    c.step_values AS steps
FROM {schema}.claim_free(%(queues)b::text[], %(leases)b::float8[], %(free)b::text[],
    %(limit)s::int, %(holder)s::text, %(now)s::float8, %(schema)s::text) c

-- name: settle_claim
-- The worker's cycle for queues without limits, as m008's function: settle (the settle's arrays,
-- as `settle`), the dependents' follow-up when any of the jobs has dependents, then claim (the
-- claim's parameters, as claim_free). Sent alone it is its own implicit transaction, one round
-- trip (store.settle_and_claim). Its rows: the settlements' (o_applied, o_wake: see m008), then
-- the claimed jobs (COLUMNS, then CLAIMED's tail).
SELECT * FROM {schema}.settle_claim(%(ids)b::text[], %(tokens)b::text[], %(outcomes)b::text[],
    %(results)b::text[], %(errors)b::text[], %(delays)b::float8[], %(executions)b::text[],
    %(queues)b::text[], %(leases)b::float8[], %(free)b::text[], %(limit)s::int,
    %(holder)s::text, %(now)s::float8, %(schema)s::text)

-- name: claim
-- The claim of queues without limits (the worker's usual one): the due jobs of `free`, best
-- first. Its own statement rather than claim_limited with no ids: the generic plan of that one
-- ran its `picked` scan with an empty list as a BitmapAnd that read every entry of jobs_claim
-- (every waiting job) at each claim.
{claim_start}
cand AS (
    SELECT c.id FROM free c
    ORDER BY c.priority DESC, c.due, c.seq
    LIMIT %(limit)s
),
{claim_end}

-- name: claim_limited
-- The claim when some queues have limits: `ids`, the jobs their limits let start
-- (claims.candidates), join the due jobs of the others.
{claim_start}
picked AS (
    SELECT j.id, j.priority, j.due, j.seq FROM {jobs} j
    WHERE j.id = ANY(%(ids)b::text[]) AND j.state = 'pending'
      AND NOT EXISTS (SELECT 1 FROM {paused} p WHERE p.queue = j.queue)  -- LIM-04
    FOR UPDATE SKIP LOCKED
),
cand AS (
    SELECT c.id FROM (SELECT * FROM free UNION ALL SELECT * FROM picked) c
    ORDER BY c.priority DESC, c.due, c.seq
    LIMIT %(limit)s
),
{claim_end}

-- name: claim_start
-- Fragment: the head of claim and claim_limited, up to the due jobs of the unlimited queues
-- (m007's claim_free spells the same out).
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
pol AS (SELECT * FROM unnest(%(queues)b::text[], %(leases)b::float8[]) AS p(queue, lease)),
free AS (
    SELECT x.* FROM unnest(%(free)b::text[]) AS q(name), LATERAL (
        SELECT j.id, j.priority, j.due, j.seq FROM {jobs} j
        WHERE j.state = 'pending' AND j.queue = q.name AND j.due <= (SELECT now FROM t)
        ORDER BY j.priority DESC, j.due, j.seq
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) x
    WHERE NOT EXISTS (SELECT 1 FROM {paused} p WHERE p.queue = q.name)  -- LIM-04
),

-- name: claim_end
-- Fragment: the tail of claim and claim_limited, from `cand` (the ids to claim, at most
-- limit); m007's claim_free spells the same out.
upd AS (
    UPDATE {jobs} j SET state = 'running', attempts = j.attempts + 1, started_at = t.now,
        token = replace(gen_random_uuid()::text, '-', ''), lease_seconds = pol.lease,
        lease_expires = t.now + pol.lease, holder = %(holder)s
    FROM cand, pol, t
    WHERE j.id = cand.id AND pol.queue = j.queue
    RETURNING {jcols}, j.token, j.lease_seconds
)
-- No execution row: the running attempt is the job's row (holder, started_at, attempts) until
-- it ends, when settle or end_leases write its execution once (m006).
SELECT upd.*, t.now,
    (SELECT json_object_agg(s.name, s.value) FROM {steps} s WHERE s.job_id = upd.id)::text AS steps
FROM upd, t
ORDER BY upd.priority DESC, upd.due, upd.seq

-- name: starts
-- Fragment: the attempts of every job with their queue, group and start (limit_counts): the
-- executions on record, and the running attempts from the jobs' rows (m006: they have no
-- execution row yet). An attempt that a worker of an older version claimed after m006 (a
-- rolling upgrade) has both, and counts twice: the safe direction (fewer starts let through).
(SELECT queue, grp, started_at FROM {executions}
 UNION ALL
 SELECT queue, grp, started_at FROM {jobs} WHERE state = 'running') AS starts

-- name: holder_host
-- Fragment: the host of the execution, from the job's `holder` (j's or upd's, named `holder`
-- in scope): Holder.hostname, the host part of "host|pid|start" (holder.py) up to its first
-- '/'. A '/' can only be in the host part (pid and start are numbers), so the usual holder
-- ("name/boot id|...") needs no regular expression (one cost the settle ~1.5 us per job).
CASE WHEN strpos(holder, '/') > 0 THEN split_part(holder, '/', 1)
     ELSE regexp_replace(holder, '[|][^|]*[|][^|]*$', '') END

-- name: holder_pid
-- Fragment: the pid of the execution, from the job's `holder` (Holder.pid): its next-to-last
-- '|' field (reverse: split_part counts from the end only from PostgreSQL 14 on).
reverse(split_part(reverse(holder), '|', 2))::int

-- name: limit_lock
SELECT pg_advisory_xact_lock(hashtextextended(%(schema)s || '/' || q, 0))
FROM unnest(%(queues)b::text[]) AS q ORDER BY q

-- name: limit_counts
-- Live leases and recent starts of one limited queue, per group: ('run'|'rate'|'grate', grp, n).
-- Starts: the ended attempts' executions and the running attempts' jobs (fragment `starts`).
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT 'run', grp, count(*) FROM {jobs}
WHERE state = 'running' AND queue = %(queue)s GROUP BY grp
UNION ALL
SELECT 'rate', NULL, count(*) FROM {starts}, t
WHERE queue = %(queue)s AND started_at > t.now - %(period)s AND started_at <= t.now
UNION ALL
SELECT 'grate', grp, count(*) FROM {starts}, t
WHERE queue = %(queue)s AND grp IS NOT NULL
  AND started_at > t.now - %(gperiod)s AND started_at <= t.now
GROUP BY grp

-- name: limit_candidates
-- Due jobs of one limited queue that fit its room, at most `room` per group (LIM-03).
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
room AS (SELECT * FROM unnest(%(groups)b::text[], %(rooms)b::int[]) AS r(grp, room)),
c AS (
    SELECT j.id, j.grp, j.priority, j.due, j.seq,
        row_number() OVER (PARTITION BY j.grp ORDER BY j.priority DESC, j.due, j.seq) AS rn
    FROM {jobs} j
    WHERE j.state = 'pending' AND j.queue = %(queue)s AND j.due <= (SELECT now FROM t)
)
SELECT c.id FROM c LEFT JOIN room r ON r.grp = c.grp
WHERE c.grp IS NULL OR c.rn <= COALESCE(r.room, %(default_room)s)
ORDER BY c.priority DESC, c.due, c.seq
LIMIT %(limit)s

-- name: settle
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
s AS (
    SELECT * FROM unnest(%(ids)b::text[], %(tokens)b::text[], %(outcomes)b::text[],
        %(results)b::text[], %(errors)b::text[], %(delays)b::float8[], %(executions)b::text[])
    WITH ORDINALITY AS s(job_id, token, outcome, result, error, delay, execution, ord)
),
{settle_body}
SELECT s.ord, upd.state, upd.queue,
    upd.id IS NOT NULL AND EXISTS (SELECT 1 FROM {deps} d WHERE d.parent_id = upd.id)
FROM s LEFT JOIN upd ON upd.ord = s.ord
ORDER BY s.ord

-- name: settle_body
-- Fragment: the settle's WITH list after `t` (its clock) and `s` (the settlements: job_id,
-- token, outcome, result, error, delay, execution, ord), which the statement `settle` and m008's
-- function `settle_claim` each define: `upd` (the jobs it ended, with the settlement's ord),
-- their executions and the counters. A change here changes what a new schema's settle_claim
-- does but not an installed one's: it needs a migration that replaces the function
-- (tests/unit/test_postgres_statements.py holds m008's composed text).
one AS (SELECT DISTINCT ON (job_id) * FROM s ORDER BY job_id, ord),
-- One UPDATE finds, locks and ends the jobs, its SET computed from the row it locked (a
-- concurrent cancel or reaper is re-read under READ COMMITTED): a SELECT ... FOR UPDATE before
-- it wrote a lock record per job and visited each row twice.
upd AS (
    -- x.state: the state the settlement leaves, written out once (a sub-SELECT of the row's
    -- columns as they were, run for each row).
    UPDATE {jobs} j SET (state, attempts, result, error, due, finished_at, expires_at) = (
        SELECT x.state,
            CASE WHEN one.outcome IN ('snooze', 'handback') AND x.state = 'pending'
                 THEN j.attempts - 1 ELSE j.attempts END,
            CASE WHEN x.state = 'done' THEN one.result ELSE j.result END,
            CASE WHEN x.state = 'done' THEN NULL
                 WHEN x.state = 'cancelled' THEN {cancelled_while_running}
                 WHEN one.outcome IN ('retry', 'fail') THEN one.error
                 ELSE j.error END,
            CASE WHEN x.state = 'pending' AND one.outcome IN ('retry', 'snooze')
                 THEN t.now + one.delay ELSE j.due END,
            CASE WHEN x.state <> 'pending' THEN t.now END,
            CASE WHEN x.state = 'done' THEN t.now + j.dedupe
                 WHEN x.state <> 'pending' THEN t.now + j.keep END
        FROM (SELECT {settled_state} AS state) x),
        token = NULL, last_token = j.token, lease_expires = NULL, lease_seconds = NULL
    FROM one, t
    WHERE j.id = one.job_id AND j.token = one.token AND j.state = 'running'
    -- attempt: the ended attempt's number, attempts as the claim left it (the SET above gave a
    -- snoozed or handed back job its attempt back). holder stays on the row (m006).
    RETURNING j.id, j.state, j.queue, one.ord, one.outcome, one.error, one.execution, j.grp,
        j.started_at, j.holder,
        j.attempts + CASE WHEN one.outcome IN ('snooze', 'handback') AND j.state = 'pending'
                          THEN 1 ELSE 0 END AS attempt
),
-- The attempt's execution, written once as it ends (m006).
ended AS (
    INSERT INTO {executions} AS e (job_id, queue, grp, attempt, host, pid, started_at, ended_at,
        outcome, error)
    SELECT upd.id, upd.queue, upd.grp, upd.attempt, {holder_host}, {holder_pid},
        upd.started_at, t.now,
        COALESCE(upd.execution,  -- rules.execution_outcome
            CASE WHEN upd.state = 'cancelled' THEN {outcome_cancelled}
                 ELSE CASE upd.outcome {execution_outcomes} END END),
        upd.error
    FROM upd, t
    RETURNING e.queue, e.outcome, e.ended_at, greatest(e.ended_at - e.started_at, 0) AS d, 1 AS sign
),
{tally}

-- name: settled_state
-- Fragment: the state a settlement leaves (rules.settled_state), from the settlement `one` and
-- the job's row `j` as it was before the settle's UPDATE.
(CASE WHEN one.outcome <> 'done' AND j.cancel_requested THEN 'cancelled'
      WHEN one.outcome = 'done' THEN 'done'
      WHEN one.outcome = 'fail' THEN 'failed'
      WHEN one.outcome = 'retry' AND j.attempts >= j.max_attempts THEN 'failed'
      ELSE 'pending' END)

-- name: with_dependents
-- Which of these jobs have dependents. Its own statement, after the one that ended them: that
-- one may have waited for the row lock of a dependent's enqueue (enqueue_parents, FOR SHARE),
-- and it reads everything but the rows it locks as of its start, before that dependent existed.
SELECT DISTINCT parent_id FROM {deps} WHERE parent_id = ANY(%(ids)b::text[])

-- name: settled_before
SELECT id, last_token FROM {jobs} WHERE id = ANY(%(ids)b::text[])

-- name: end_expired
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
cur AS (
    SELECT j.id FROM {jobs} j
    WHERE j.state = 'running' AND j.lease_expires <= (SELECT now FROM t)
    ORDER BY j.lease_expires
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
{end_leases}

-- name: end_holders
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
cur AS (
    SELECT j.id FROM {jobs} j
    WHERE j.state = 'running' AND j.holder = ANY(%(holders)b::text[])
    ORDER BY j.id
    FOR UPDATE
),
{end_leases}

-- name: end_leases
-- The shared tail of end_expired and end_holders (JOB-04, DUR-02): rules.lease_ended.
upd AS (
    UPDATE {jobs} j SET
        state = CASE WHEN j.cancel_requested THEN 'cancelled'
                     WHEN j.attempts >= j.max_attempts THEN 'failed'
                     ELSE 'pending' END,
        error = CASE WHEN j.cancel_requested THEN {cancelled_while_running}
                     WHEN j.attempts >= j.max_attempts
                     THEN format({attempts_used}, %(outcome)s::text, j.attempts, j.max_attempts)
                     ELSE j.error END,
        finished_at = CASE WHEN j.cancel_requested OR j.attempts >= j.max_attempts
                           THEN t.now END,
        expires_at = CASE WHEN j.cancel_requested OR j.attempts >= j.max_attempts
                          THEN t.now + j.keep END,
        token = NULL, last_token = j.token, lease_expires = NULL, lease_seconds = NULL
    FROM cur, t
    WHERE j.id = cur.id
    RETURNING j.id, j.state, j.queue, j.grp, j.attempts, j.started_at, j.holder
),
-- The attempt's execution, written once as it ends (m006); or, for an attempt claimed by an
-- older version of tinyjobs (an open execution row, a rolling upgrade), that row ended.
closed AS (
    UPDATE {executions} e SET ended_at = t.now, outcome = %(outcome)s
    FROM upd, t
    WHERE e.job_id = upd.id AND e.ended_at IS NULL
    RETURNING e.job_id, e.queue, e.outcome, e.ended_at,
        greatest(e.ended_at - e.started_at, 0) AS d, 1 AS sign
),
opened AS (
    INSERT INTO {executions} AS e (job_id, queue, grp, attempt, host, pid, started_at, ended_at,
        outcome)
    SELECT upd.id, upd.queue, upd.grp, upd.attempts, {holder_host}, {holder_pid},
        upd.started_at, t.now, %(outcome)s
    FROM upd, t
    WHERE upd.id NOT IN (SELECT job_id FROM closed)
    RETURNING e.job_id, e.queue, e.outcome, e.ended_at,
        greatest(e.ended_at - e.started_at, 0) AS d, 1 AS sign
),
ended AS (SELECT * FROM closed UNION ALL SELECT * FROM opened),
{tally}
SELECT upd.id, upd.state, upd.queue,
    EXISTS (SELECT 1 FROM {deps} d WHERE d.parent_id = upd.id)
FROM upd

-- name: lock_dependents
SELECT j.id FROM {jobs} j
WHERE j.state = 'blocked'
  AND j.id IN (SELECT d.job_id FROM {deps} d WHERE d.parent_id = ANY(%(ids)b::text[]))
ORDER BY j.id
FOR UPDATE

-- name: unblock
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
UPDATE {jobs} j SET state = 'pending', due = GREATEST(j.due, t.now)
FROM t
WHERE j.state = 'blocked'
  AND j.id IN (SELECT d.job_id FROM {deps} d WHERE d.parent_id = ANY(%(ids)b::text[]))
  AND NOT EXISTS (
      SELECT 1 FROM {deps} d JOIN {jobs} p ON p.id = d.parent_id
      WHERE d.job_id = j.id AND p.state <> 'done')
RETURNING j.queue

-- name: cascade_cancel
WITH RECURSIVE t AS (
    SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now
),
roots AS (SELECT * FROM unnest(%(ids)b::text[], %(reasons)b::text[]) AS r(id, reason)),
{cascade_tail}

-- name: cascade_settled
-- cascade_cancel for the jobs of a settlement batch that are failed or cancelled now, the
-- reason read from each one's state (rules.DEPENDENCY_REASONS) rather than passed: the worker's
-- cycle sends it with the settle, before it has read which jobs the settle ended how. A job
-- that was failed or cancelled before (its settlement not applied) has no blocked dependents
-- left, as its own end cascaded: nothing happens for it.
WITH RECURSIVE t AS (
    SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now
),
roots AS (
    SELECT j.id, CASE j.state WHEN 'failed' THEN {reason_failed} ELSE {reason_cancelled} END
        AS reason
    FROM {jobs} j
    WHERE j.id = ANY(%(ids)b::text[]) AND j.state IN ('failed', 'cancelled')
      AND EXISTS (SELECT 1 FROM {deps} d WHERE d.parent_id = j.id)
),
{cascade_tail}

-- name: cascade_tail
-- Fragment: the tail of cascade_cancel and cascade_settled, from `roots` (id, reason).
{cascade_pick}
UPDATE {jobs} j SET state = 'cancelled',
    error = format({dependency_cancelled}, pick.parent, pick.reason),  -- rules.dependency_error
    finished_at = t.now, expires_at = t.now + j.keep
FROM pick, t
WHERE j.id = pick.id AND j.state = 'blocked'
RETURNING j.id

-- name: cascade_pick
-- Fragment: the blocked jobs that run after `roots` (id, reason), recursively, each with the
-- parent and reason its error names (cascade_tail; m008's settle_claim writes its own UPDATE).
tree(id, parent, reason) AS (
    SELECT d.job_id, r.id, r.reason FROM roots r
    JOIN {deps} d ON d.parent_id = r.id
    JOIN {jobs} j ON j.id = d.job_id AND j.state = 'blocked'
    UNION
    SELECT d.job_id, tr.id, {reason_cancelled} FROM tree tr
    JOIN {deps} d ON d.parent_id = tr.id
    JOIN {jobs} j ON j.id = d.job_id AND j.state = 'blocked'
),
pick AS (SELECT DISTINCT ON (id) id, parent, reason FROM tree ORDER BY id, parent)

-- name: renew
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
UPDATE {jobs} j SET lease_expires = t.now + j.lease_seconds
FROM t
WHERE j.token = ANY(%(tokens)b::text[]) AND j.state = 'running'
RETURNING j.token, j.cancel_requested

-- name: save_step
WITH j AS (SELECT id FROM {jobs} WHERE token = %(token)s AND state = 'running' FOR SHARE)
INSERT INTO {steps} (job_id, name, value)
SELECT j.id, %(name)s, %(value)s FROM j
ON CONFLICT (job_id, name) DO UPDATE SET value = EXCLUDED.value
RETURNING 1

-- name: cancel
WITH j AS (SELECT id, state, queue FROM {jobs} WHERE id = %(id)s FOR UPDATE),
mark AS (
    UPDATE {jobs} SET cancel_requested = true FROM j
    WHERE {jobs}.id = j.id AND j.state = 'running'
    RETURNING {jobs}.id
),
del AS (
    DELETE FROM {jobs} USING j
    WHERE {jobs}.id = j.id AND j.state IN ('pending', 'blocked')
    RETURNING {jobs}.id
)
SELECT (SELECT count(*) FROM mark), (SELECT count(*) FROM del),
    (SELECT queue FROM j), pg_notify(%(channel)s, (SELECT queue FROM j))
WHERE EXISTS (SELECT 1 FROM mark UNION ALL SELECT 1 FROM del)

-- name: retry
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
UPDATE {jobs} j SET state = 'pending', due = t.now,
    max_attempts = j.attempts + j.attempt_budget, cancel_requested = false,
    finished_at = NULL, expires_at = NULL
FROM t
WHERE j.id = %(id)s AND j.state IN ('failed', 'cancelled')
RETURNING pg_notify(%(channel)s, j.queue)

-- name: get
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT {jcols}, t.now,
    CASE WHEN j.state = 'pending' THEN (
        SELECT count(*) FROM {jobs} o
        WHERE o.queue = j.queue AND o.state = 'pending' AND o.due <= GREATEST(t.now, j.due)
          AND (o.priority > j.priority OR (o.priority = j.priority AND (o.due < j.due
               OR (o.due = j.due AND o.seq < j.seq))))
    ) END AS ahead
FROM {jobs} j, t
WHERE j.id = %(id)s

-- name: executions
-- The ended attempts' executions, oldest first, then the running attempt from the job's row
-- (m006), unless it has an open execution row of its own (an older version's claim).
SELECT attempt, host, pid, started_at, ended_at, outcome, error FROM (
    SELECT id, attempt, host, pid, started_at, ended_at, outcome, error
    FROM {executions} WHERE job_id = %(id)s
    UNION ALL
    SELECT NULL, j.attempts, {holder_host}, {holder_pid}, j.started_at, NULL, NULL, NULL
    FROM {jobs} j
    WHERE j.id = %(id)s AND j.state = 'running' AND NOT EXISTS (
        SELECT 1 FROM {executions} e WHERE e.job_id = j.id AND e.ended_at IS NULL)
) x ORDER BY id NULLS LAST

-- name: jobs
-- scheduled and waiting are pending jobs, told apart by their due time: rules.reported_state
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT {cols}, t.now FROM {jobs}, t
WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(state)s::text IS NULL
       OR (%(state)s::text = 'scheduled' AND state = 'pending' AND due > t.now)
       OR (%(state)s::text = 'waiting' AND state = 'pending' AND due <= t.now)
       OR state = %(state)s::text)
ORDER BY seq * %(direction)s::int
LIMIT %(limit)s OFFSET %(offset)s

-- name: counts
-- The reported state: rules.reported_state
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT queue,
    CASE WHEN state = 'pending' AND due > t.now THEN 'scheduled'
         WHEN state = 'pending' THEN 'waiting' ELSE state END,
    count(*)
FROM {jobs}, t
GROUP BY 1, 2

-- name: purge
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
DELETE FROM {jobs} WHERE id IN (
    SELECT id FROM {jobs}, t
    WHERE state IN ('done', 'failed', 'cancelled') AND expires_at <= t.now
    ORDER BY expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING id

-- name: fire_cron
INSERT INTO {cron} AS c (schedule, last_due) VALUES (%(schedule)s, %(due)s)
ON CONFLICT (schedule) DO UPDATE SET last_due = EXCLUDED.last_due
WHERE c.last_due < EXCLUDED.last_due
RETURNING 1

-- name: cron_last
SELECT last_due FROM {cron} WHERE schedule = %(schedule)s

-- name: lead
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
INSERT INTO {leaders} AS l (name, holder, expires)
SELECT %(name)s, %(holder)s, t.now + %(ttl)s FROM t
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
WHERE l.holder = EXCLUDED.holder OR l.expires <= EXCLUDED.expires - %(ttl)s
RETURNING 1

-- name: resign
DELETE FROM {leaders} WHERE name = %(name)s AND holder = %(holder)s

-- name: holders
SELECT DISTINCT holder FROM {jobs}
WHERE state = 'running' AND left(holder, length(%(host)s) + 1) = %(host)s || '|'

-- name: until_due
-- Seconds until the earliest pending job of these queues that is not due yet falls due (NULL:
-- none), for `wait`. A skip scan of jobs_claim (queue, priority DESC, due): per queue, one
-- index probe per priority present and one for its earliest due time after now, however many
-- jobs wait.
WITH RECURSIVE t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
p AS (
    SELECT q.name AS queue,
        (SELECT max(j.priority) FROM {jobs} j WHERE j.state = 'pending' AND j.queue = q.name) AS pr
    FROM unnest(%(queues)s::text[]) AS q(name)
    UNION ALL
    SELECT p.queue, (SELECT max(j.priority) FROM {jobs} j
                     WHERE j.state = 'pending' AND j.queue = p.queue AND j.priority < p.pr)
    FROM p WHERE p.pr IS NOT NULL
)
SELECT min((SELECT min(j.due) FROM {jobs} j
            WHERE j.state = 'pending' AND j.queue = p.queue AND j.priority = p.pr
              AND j.due > t.now)) - min(t.now)
FROM p, t WHERE p.pr IS NOT NULL

-- name: notify
-- Wake the waiters of these queues, in a transaction of its own that commits without waiting
-- for the WAL flush: it carries no data (a crash loses nothing but a wake-up), and a notifying
-- transaction holds a database-wide lock through its commit, so a flush there would serialise
-- the notifications of every process on the database.
SELECT set_config('synchronous_commit', 'off', true), pg_notify(%(channel)s, q)
FROM unnest(%(queues)b::text[]) AS q

-- name: notify_one
-- `notify` for one queue, the wake-up of every single enqueue: a text parameter instead of an
-- array (psycopg dumps arrays in Python: -12 us of client CPU per enqueue measured).
SELECT set_config('synchronous_commit', 'off', true), pg_notify(%(channel)s, %(queue)s)

-- The dashboard's and metrics' statements (issue 16; see views.py).

-- name: pause_lock
-- LIM-04: a claim takes this shared lock per queue it asks for, in a statement of its own
-- before the claim statement, and `pause` the exclusive one before it writes: a claim in flight
-- when pause starts commits before pause returns, and a later claim statement (a new snapshot
-- under READ COMMITTED) sees the paused row. It also sets generic_plans' setting for the rest
-- of the transaction (one statement fewer in the worker's cycle, which sends this first), JIT
-- off included (see generic_plans).
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true),
    pg_advisory_xact_lock_shared(hashtextextended(%(schema)s || '/pause/' || q, 0))
FROM unnest(%(queues)b::text[]) AS q ORDER BY q

-- name: pause
WITH l AS (SELECT pg_advisory_xact_lock(hashtextextended(%(schema)s || '/pause/' || %(queue)s, 0)))
INSERT INTO {paused} (queue) SELECT %(queue)s FROM l ON CONFLICT DO NOTHING

-- name: resume
WITH d AS (DELETE FROM {paused} WHERE queue = %(queue)s)
SELECT pg_notify(%(channel)s, %(queue)s)

-- name: paused_queues
SELECT queue FROM {paused} ORDER BY queue

-- name: browse
-- views.py replaces the marker below with fixed conditions of the browse_* blocks, so that the
-- planner walks the index that matches the filters given. Newest first is seq descending (the
-- enqueue order, m009): jobs_seq, or jobs_browse_rare for a rare state.
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT {cols}, t.now FROM {jobs}, t
WHERE seq < %(after)s::bigint /*filters*/
ORDER BY seq DESC
LIMIT %(limit)s

-- name: browse_ends
-- Each subquery reads one end of jobs_seq.
SELECT COALESCE((SELECT min(seq) FROM {jobs}), 0), COALESCE((SELECT max(seq) FROM {jobs}), 0)

-- name: browse_window
seq >= %(floor)s::bigint

-- name: browse_state
state = %(stored)s

-- name: browse_rare
-- The literal IN list lets the planner use the partial index jobs_browse_rare.
state = %(stored)s AND state IN ('failed', 'cancelled', 'blocked')

-- name: browse_split
(CASE WHEN %(split)s = 'scheduled' THEN due > t.now ELSE due <= t.now END)

-- name: browse_queue
queue = %(queue)s

-- name: browse_task
task = %(task)s

-- name: browse_text
(starts_with(id, %(text)s) OR strpos(payload, %(text)s) > 0 OR strpos(error, %(text)s) > 0)

-- name: dependents
-- MATERIALIZED: look the children up in jobs_after first; left to itself the planner may walk
-- jobs_seq in order hoping to meet them early, which reads the whole table when there are none.
WITH t AS (SELECT extract(epoch FROM now())::float8 AS now),
kids AS MATERIALIZED (
    SELECT {cols} FROM {jobs}
    WHERE after_ids @> ARRAY[%(id)s::text] AND cardinality(after_ids) > 0
)
SELECT kids.*, t.now FROM kids, t ORDER BY kids.seq LIMIT %(limit)s

-- name: steps_by_id
SELECT name, value FROM {steps} WHERE job_id = %(id)s

-- name: table_rows
-- The jobs table's rows as the planner estimates them: the rows per page of its last ANALYZE
-- or VACUUM times the pages it has now (so a table grown since is not taken for small), and
-- before any, `density` rows per page. Without it a table never analyzed (autovacuum off, or
-- not yet come round) read reltuples -1 and was counted row by row: 1.5 s at 10^6 jobs.
SELECT CASE WHEN reltuples >= 0 AND relpages > 0 THEN reltuples / relpages ELSE %(density)s END
    * (pg_relation_size(oid) / current_setting('block_size')::float8)
FROM pg_class WHERE oid = to_regclass(%(table)s)

-- name: live_counts
-- Exact counts of the live states: pending from jobs_claim, running and blocked from rows few.
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT queue, CASE WHEN due > t.now THEN 'scheduled' ELSE 'waiting' END, count(*)
FROM {jobs}, t WHERE state = 'pending' GROUP BY 1, 2
UNION ALL
-- Each state on its own partial index (an IN over both has no index: a scan of every row).
SELECT queue, state, count(*) FROM {jobs} WHERE state = 'running' GROUP BY 1, 2
UNION ALL
SELECT queue, state, count(*) FROM {jobs}
WHERE state = 'blocked' AND state IN ('failed', 'cancelled', 'blocked') GROUP BY 1, 2

-- name: past_lease
-- Running jobs whose lease expired and that no reaper has returned yet (reap takes <= now):
-- walks jobs_running (lease_expires) WHERE state = 'running'.
SELECT queue, count(*) FROM {jobs}
WHERE state = 'running' AND lease_expires <= COALESCE(%(now)s::float8, extract(epoch FROM now())::float8)
GROUP BY queue

-- name: final_sample
-- Final jobs per queue and state, estimated from a sample of the table's pages (the same pages
-- while the table does not change, so figures do not jitter between refreshes).
SELECT queue, state, count(*) FROM {jobs} TABLESAMPLE SYSTEM (%(percent)s) REPEATABLE (16)
WHERE state IN ('done', 'failed', 'cancelled') GROUP BY 1, 2

-- name: oldest_due
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT queue, min(due) FROM {jobs}, t WHERE state = 'pending' AND due <= t.now GROUP BY queue

-- name: finished_series
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT %(since)s::float8 + floor((ended_at - %(since)s::float8) / %(step)s::float8) * %(step)s::float8,
    outcome, count(*)
FROM {executions}, t
WHERE ended_at >= %(since)s::float8 AND ended_at <= t.now
GROUP BY 1, 2 ORDER BY 1, 2

-- name: finished_minutes
-- finished_series when `since` and `step` are whole minutes (views.py): the whole minutes
-- before the one that holds `now` from exec_minutes (summed over the shards), the rest from
-- executions_ended. Exact: an execution is in the minute that holds its ended_at, so the
-- minutes in [since, z) hold exactly the executions with since <= ended_at < z, and each
-- minute lies in one bucket. z: the largest multiple of 60 not above now (tally's rule).
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now),
zz AS (SELECT now, floor(now / 60) * 60 AS m FROM t),
z AS (
    SELECT now, CASE WHEN m > now THEN m - 60 WHEN m + 60 <= now THEN m + 60 ELSE m END AS z
    FROM zz
),
found AS (
    SELECT c.minute AS at, c.outcome, c.n FROM {exec_minutes} c, z
    WHERE c.minute >= %(since)s::float8 AND c.minute < z.z
    UNION ALL
    SELECT e.ended_at, e.outcome, 1 FROM {executions} e, z
    WHERE e.ended_at >= greatest(%(since)s::float8, z.z) AND e.ended_at <= z.now
)
SELECT %(since)s::float8 + floor((at - %(since)s::float8) / %(step)s::float8) * %(step)s::float8,
    outcome, sum(n)
FROM found
GROUP BY 1, 2 HAVING sum(n) > 0 ORDER BY 1, 2

-- name: execution_stats
-- From exec_stats (m005), summed over the shards: views.py puts each duration class `upto`
-- under the first bound at or above it.
SELECT queue, outcome, upto, sum(n), sum(seconds) FROM {exec_stats}
GROUP BY 1, 2, 3 HAVING sum(n) > 0

-- name: beat
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
INSERT INTO {workers} (host, pid, queues, slots, busy, started_at, seen_at)
SELECT %(host)s, %(pid)s, %(queues)s::text[], %(slots)s, %(busy)s, %(started_at)s, t.now FROM t
ON CONFLICT (host, pid) DO UPDATE SET
    queues = EXCLUDED.queues, slots = EXCLUDED.slots, busy = EXCLUDED.busy,
    started_at = EXCLUDED.started_at, seen_at = EXCLUDED.seen_at

-- name: workers
WITH t AS (SELECT COALESCE(%(now)s::float8, extract(epoch FROM now())::float8) AS now)
SELECT host, pid, queues, slots, busy, started_at, seen_at, t.now FROM {workers}, t
ORDER BY host COLLATE "C", pid

-- name: drop_workers
DELETE FROM {workers} WHERE seen_at < %(before)s

-- name: delete_job
DELETE FROM {jobs} WHERE id = %(id)s RETURNING state
