-- Every statement the SQLite store runs, one `-- name: <name>` block each, loaded once. A block
-- is named for the store method that runs it (`claim`, `jobs`, ...), or that method's name and
-- what the statement does there (`claim_candidates`); the statements several methods share
-- (job_by_id, finish_job, ...) are named for what they do, as in postgres/queries.sql.
-- Lists of values are passed as one JSON array and read with json_each, so no SQL is built
-- at run time.

-- name: job_by_id
SELECT * FROM jobs WHERE id = ?

-- name: jobs_by_ids
SELECT * FROM jobs WHERE id IN (SELECT value FROM json_each(?))

-- name: live_by_key
SELECT * FROM jobs WHERE key = ? AND state IN ('pending', 'blocked', 'running')

-- name: insert_job
INSERT INTO jobs (
    id, task, queue, payload, priority, due, state, max_attempts, attempt_budget, key, grp,
    after_ids, dedupe, keep, error, created_at, finished_at, expires_at
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_job_plain
-- insert_job for the commonest job: pending, no key, no group, after no other job (the columns
-- left out are NULL). Every None bound as a parameter costs Python's sqlite3 module an adapter
-- lookup that raises and clears an AttributeError (about 2,300 instructions): insert_job binds
-- six of them for such a job, this none (rows.plain_job_row).
INSERT INTO jobs (
    id, task, queue, payload, priority, due, state, max_attempts, attempt_budget, dedupe, keep,
    created_at
) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)

-- name: insert_job_plain_group
-- insert_job_plain for a job with a group.
INSERT INTO jobs (
    id, task, queue, payload, priority, due, state, max_attempts, attempt_budget, dedupe, keep,
    created_at, grp
) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)

-- name: insert_dep
INSERT OR IGNORE INTO deps (parent_seq, child_seq) VALUES (?, ?)

-- name: delete_steps
DELETE FROM steps WHERE job_seq IN (SELECT value FROM json_each(?))

-- name: delete_executions
DELETE FROM executions WHERE job_seq IN (SELECT value FROM json_each(?))

-- name: delete_deps
DELETE FROM deps
WHERE child_seq IN (SELECT value FROM json_each(:seqs))
   OR parent_seq IN (SELECT value FROM json_each(:seqs))

-- name: delete_jobs
DELETE FROM jobs WHERE seq IN (SELECT value FROM json_each(?))

-- name: claim_candidates
-- Walks jobs_claim in claim order; groups found full and jobs already taken are left out, and
-- a paused queue has none (LIM-04: read in the claim's transaction, serialised with pause();
-- a constant subquery, evaluated once per statement).
SELECT seq, queue, grp, priority, due FROM jobs
WHERE state = 'pending' AND queue = :queue AND due <= :now
  AND NOT EXISTS (SELECT 1 FROM paused WHERE paused.queue = :queue)
  AND (grp IS NULL OR grp NOT IN (SELECT value FROM json_each(:full)))
  AND seq NOT IN (SELECT value FROM json_each(:taken))
ORDER BY priority DESC, due, seq
LIMIT :limit

-- name: claim_candidates_first
-- claim_candidates when nothing is left out yet (no full group, nothing taken: a queue's first
-- page, nearly always its only one): each NOT IN list would be an ephemeral table to build.
-- The paused check is this statement's, not one of its own: a statement less per claim.
SELECT seq, queue, grp, priority, due FROM jobs
WHERE state = 'pending' AND queue = :queue AND due <= :now
  AND NOT EXISTS (SELECT 1 FROM paused WHERE paused.queue = :queue)
ORDER BY priority DESC, due, seq
LIMIT :limit

-- name: claim
-- The columns in the order rows.claimed_job reads them (by position: a name is a lookup).
UPDATE jobs SET
    state = 'running',
    attempts = attempts + 1,
    started_at = :now,
    token = lower(hex(randomblob(8))),
    lease_seconds = :lease,
    lease_expires = :now + :lease,
    holder = :holder
WHERE seq IN (SELECT value FROM json_each(:seqs)) AND state = 'pending'
RETURNING seq, id, task, queue, payload, priority, due, attempts, max_attempts, created_at,
          started_at, finished_at, error, result, key, grp, after_ids, cancel_requested, token,
          lease_seconds, EXISTS (SELECT 1 FROM steps WHERE steps.job_seq = jobs.seq) AS has_steps

-- name: claim_due
-- claim_candidates_first and claim as one statement, for a claim of one queue without limits
-- (nearly every claim: a worker of one queue): the lease is written in the statement that
-- finds the jobs, so that a claim outside a transaction is one autocommit statement (no BEGIN,
-- no COMMIT of its own to run; the commit, synced, is the statement's end). The paused check
-- is a constant subquery (LIM-04), read under the write lock the statement takes at its start.
-- The last column is the job's steps as a JSON object (NULL without steps), read in the same
-- statement instead of a claim_steps of their own.
UPDATE jobs SET
    state = 'running',
    attempts = attempts + 1,
    started_at = :now,
    token = lower(hex(randomblob(8))),
    lease_seconds = :lease,
    lease_expires = :now + :lease,
    holder = :holder
WHERE seq IN (
    SELECT seq FROM jobs
    WHERE state = 'pending' AND queue = :queue AND due <= :now
      AND NOT EXISTS (SELECT 1 FROM paused WHERE paused.queue = :queue)
    ORDER BY priority DESC, due, seq
    LIMIT :limit
) AND state = 'pending'
RETURNING seq, id, task, queue, payload, priority, due, attempts, max_attempts, created_at,
          started_at, finished_at, error, result, key, grp, after_ids, cancel_requested, token,
          lease_seconds,
          (SELECT json_group_object(name, value) FROM steps WHERE steps.job_seq = jobs.seq)

-- name: claim_steps
-- Run for the claimed jobs that have steps (the claim's last column says which). A join driven
-- by the list (CROSS JOIN keeps that order), each job's steps found by its seq: not
-- `job_seq IN (SELECT ...)`, which would build an ephemeral index of the list first.
SELECT steps.job_seq, steps.name, steps.value
FROM json_each(?) AS claimed CROSS JOIN steps ON steps.job_seq = claimed.value

-- name: claim_running
SELECT count(*) FROM jobs WHERE state = 'running' AND queue = ?

-- name: claim_running_groups
SELECT grp, count(*) FROM jobs
WHERE state = 'running' AND queue = ? AND grp IS NOT NULL
GROUP BY grp

-- name: claim_starts
-- Attempts started in the window: the ended ones on record, and the running ones from their
-- jobs' rows (no execution row until the attempt ends: migration 5). An attempt an older
-- version claimed has both and counts twice: the safe direction (fewer starts let through).
SELECT (SELECT count(*) FROM executions
        WHERE queue = :queue AND started_at > :since AND started_at <= :now)
     + (SELECT count(*) FROM jobs INDEXED BY jobs_running
        WHERE state = 'running' AND queue = :queue AND started_at > :since AND started_at <= :now)

-- name: claim_starts_groups
SELECT grp, count(*) FROM (
    SELECT grp FROM executions
    WHERE queue = :queue AND started_at > :since AND started_at <= :now AND grp IS NOT NULL
    UNION ALL
    SELECT grp FROM jobs INDEXED BY jobs_running
    WHERE state = 'running' AND queue = :queue AND started_at > :since AND started_at <= :now
      AND grp IS NOT NULL
)
GROUP BY grp

-- name: renew
UPDATE jobs SET lease_expires = :now + lease_seconds
WHERE token IN (SELECT value FROM json_each(:tokens)) AND state = 'running'
RETURNING token, cancel_requested

-- name: save_step
INSERT INTO steps (job_seq, name, value)
SELECT seq, :name, :value FROM jobs WHERE token = :token AND state = 'running'
ON CONFLICT (job_seq, name) DO UPDATE SET value = excluded.value

-- name: settle_running
SELECT * FROM jobs WHERE id = ? AND token = ? AND state = 'running'

-- name: finish_job
UPDATE jobs SET
    state = :state, result = :result, error = :error, finished_at = :now, expires_at = :expires,
    token = NULL, lease_expires = NULL, lease_seconds = NULL, holder = NULL
WHERE seq = :seq

-- name: requeue_job
UPDATE jobs SET
    state = 'pending', due = :due, attempts = attempts - :give_back,
    error = coalesce(:error, error),
    token = NULL, lease_expires = NULL, lease_seconds = NULL, holder = NULL
WHERE seq = :seq

-- name: record_execution
-- An attempt's execution, written once when it ends (migration 5): ?1 job seq, ?2 attempt,
-- ?3 host, ?4 pid, ?5 started_at, ?6 ended_at, ?7 outcome, ?8 error, ?9 queue, ?10 group.
-- Not when the attempt has an open row of its own (an older version's claim wrote one): the
-- caller closes that row instead (close_execution), when this inserted nothing.
INSERT INTO executions (job_seq, attempt, host, pid, started_at, ended_at, outcome, error, queue, grp)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10
WHERE NOT EXISTS (SELECT 1 FROM executions WHERE job_seq = ?1 AND ended_at IS NULL)

-- name: insert_execution
-- record_execution where the caller knows the attempt has no open row (settle_done says so):
-- VALUES, not a SELECT that reads executions, which SQLite would first copy into an ephemeral
-- table (the target table is read: measured, about 5 % of a batch's instructions).
INSERT INTO executions (job_seq, attempt, host, pid, started_at, ended_at, outcome, error, queue, grp)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_execution_done
-- insert_execution of a done attempt of a job without a group: error and grp left NULL, not
-- bound as None (see insert_job_plain: each None bound costs an adapter lookup).
INSERT INTO executions (job_seq, attempt, host, pid, started_at, ended_at, outcome, queue)
VALUES (?, ?, ?, ?, ?, ?, 'done', ?)

-- name: insert_execution_done_group
-- insert_execution_done for jobs with a group.
INSERT INTO executions (job_seq, attempt, host, pid, started_at, ended_at, outcome, queue, grp)
VALUES (?, ?, ?, ?, ?, ?, 'done', ?, ?)

-- name: close_execution
-- An open execution row an older version's claim wrote (see record_execution).
UPDATE executions SET ended_at = :now, outcome = :outcome, error = :error
WHERE job_seq = :seq AND ended_at IS NULL

-- name: release_dependents
-- Blocked children of a job that just succeeded, whose parents are now all done (a parent
-- purged meanwhile was done: only done parents are purged while a child still waits).
-- A dependent never runs before its own due time. Their queues are woken (store._wake).
UPDATE jobs SET state = 'pending', due = max(due, :now)
WHERE state = 'blocked'
  AND seq IN (SELECT child_seq FROM deps WHERE parent_seq = :seq)
  AND NOT EXISTS (
      SELECT 1 FROM deps d JOIN jobs p ON p.seq = d.parent_seq
      WHERE d.child_seq = jobs.seq AND p.state != 'done'
  )
RETURNING queue

-- name: cancel_dependents
UPDATE jobs SET state = 'cancelled', error = :error, finished_at = :now, expires_at = :now + keep
WHERE state = 'blocked' AND seq IN (SELECT child_seq FROM deps WHERE parent_seq = :seq)
RETURNING seq, id

-- name: reap
SELECT * FROM jobs WHERE state = 'running' AND lease_expires <= ? ORDER BY lease_expires LIMIT ?

-- name: end_leases
SELECT * FROM jobs WHERE state = 'running' AND holder IN (SELECT value FROM json_each(?))

-- name: holders
-- Holder ids are "<host>|<pid>|<started>"; walks jobs_running (the running jobs).
SELECT DISTINCT holder FROM jobs
WHERE state = 'running' AND holder >= :host || '|' AND holder < :host || '}'
ORDER BY holder

-- name: cancel
UPDATE jobs SET cancel_requested = 1 WHERE seq = ?

-- name: retry
UPDATE jobs SET
    state = 'pending', due = :now, max_attempts = attempts + attempt_budget,
    cancel_requested = 0, finished_at = NULL, expires_at = NULL
WHERE id = :id AND state IN ('failed', 'cancelled')
RETURNING queue

-- name: get_ahead
-- The pending jobs a claim takes before this one that are due by then, counted in three ranges
-- of jobs_claim (queue, priority DESC, due, seq), each walked only over the jobs it counts: the
-- one OR-ed condition walked every pending job of the queue at this priority or above, those
-- behind this one and the scheduled too (10^5 jobs, 5 % waiting: 2.4 ms against 0.7).
SELECT (SELECT count(*) FROM jobs
        WHERE state = 'pending' AND queue = :queue AND priority > :priority
          AND due <= max(:now, :due))
     + (SELECT count(*) FROM jobs
        WHERE state = 'pending' AND queue = :queue AND priority = :priority AND due < :due)
     + (SELECT count(*) FROM jobs
        WHERE state = 'pending' AND queue = :queue AND priority = :priority AND due = :due
          AND seq < :seq)

-- name: executions
SELECT attempt, host, pid, started_at, ended_at, outcome, error FROM executions
WHERE job_seq = ? ORDER BY id

-- name: jobs
-- All jobs (no state asked): the table by seq, stopping at the page.
SELECT * FROM jobs
WHERE (:queue IS NULL OR queue = :queue)
ORDER BY seq {direction}
LIMIT :limit OFFSET :offset

-- name: jobs_in_state
-- One stored state, named as a constant (store.jobs formats in one of the STATES, never input)
-- so that SQLite walks jobs_state (migration 6) from that state's first or last seq and stops
-- at the page; running jobs walk jobs_running and are sorted (what runs, never what finished).
-- scheduled and waiting are pending jobs, told apart by their due time: rules.reported_state.
SELECT * FROM jobs INDEXED BY {index}
WHERE state = '{state}'
  AND (:queue IS NULL OR queue = :queue)
  AND (:split IS NULL OR (:split = 'scheduled' AND due > :now) OR (:split = 'waiting' AND due <= :now))
ORDER BY seq {direction}
LIMIT :limit OFFSET :offset

-- name: counts
-- The reported state: rules.reported_state (tinyjobs/stores/rules.py). Blocked and the final
-- states come from job_counts (kept by migration 3's triggers), pending and running from their
-- partial indexes: nothing here reads the finished jobs, so it stays flat as they pile up.
-- Pending jobs are grouped by queue alone, in jobs_claim's own order (grouping by the reported
-- state too made SQLite sort every pending entry into a temporary b-tree: 3x the time).
WITH pending AS MATERIALIZED (
    SELECT queue, count(*) AS n, sum(due > :now) AS later
    FROM jobs INDEXED BY jobs_claim WHERE state = 'pending' GROUP BY queue
)
SELECT queue, state, n FROM job_counts WHERE n > 0
UNION ALL
SELECT queue, 'scheduled', later FROM pending WHERE later > 0
UNION ALL
SELECT queue, 'waiting', n - later FROM pending WHERE n > later
UNION ALL
SELECT queue, 'running', count(*) FROM jobs INDEXED BY jobs_running WHERE state = 'running'
GROUP BY queue

-- name: purge
SELECT seq FROM jobs
WHERE expires_at <= :now AND state IN ('done', 'failed', 'cancelled')
ORDER BY expires_at LIMIT :limit

-- name: cron_last
SELECT last_due FROM cron WHERE schedule = ?

-- name: fire_cron
-- Records `due` only when it is later than the last one: one row changed means this call fires.
INSERT INTO cron (schedule, last_due) VALUES (?, ?)
ON CONFLICT (schedule) DO UPDATE SET last_due = excluded.last_due
WHERE excluded.last_due > cron.last_due

-- name: lead
INSERT INTO leaders (name, holder, expires) VALUES (:name, :holder, :now + :ttl)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
WHERE leaders.expires <= :now OR leaders.holder = excluded.holder

-- name: resign
DELETE FROM leaders WHERE name = ? AND holder = ?

-- name: settle_done
-- The common case of a batch, in one statement: done settlements whose job is still held by
-- their token and whose cancellation was not asked for. The rest go one by one (settle_one).
-- `holder` stays on the row (it is read only with state = 'running'): the RETURNING columns
-- after the fourth are the ended attempt's, for its execution row (insert_execution), and
-- whether it has an open row instead (an older version's claim: settle_close_done ends it).
-- Each job is found by its token in jobs_running (the index whose entry this update takes out
-- anyway), not by its id: the id's index is not read at all, two pages fewer per settlement
-- after another connection's commit has emptied this one's page cache.
WITH s AS (
    SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token,
           json_extract(value, '$[2]') AS result
    FROM json_each(:batch)
)
UPDATE jobs INDEXED BY jobs_running SET
    state = 'done', result = s.result, error = NULL, finished_at = :now,
    expires_at = :now + jobs.dedupe,
    token = NULL, lease_expires = NULL, lease_seconds = NULL
FROM s
WHERE jobs.id = s.id AND jobs.token = s.token AND jobs.state = 'running'
  AND jobs.cancel_requested = 0
RETURNING jobs.seq, jobs.id, EXISTS (SELECT 1 FROM deps WHERE deps.parent_seq = jobs.seq), jobs.queue,
          jobs.attempts, jobs.started_at, jobs.holder, jobs.grp,
          EXISTS (SELECT 1 FROM executions e WHERE e.job_seq = jobs.seq AND e.ended_at IS NULL)

-- name: settle_close_done
-- The open execution rows of done jobs whose attempt an older version claimed (see
-- record_execution): run only when settle_done found some.
UPDATE executions SET ended_at = :now, outcome = 'done', error = NULL
WHERE ended_at IS NULL AND job_seq IN (SELECT value FROM json_each(:seqs))

-- name: settle_release_done
-- release_dependents for the parents that settle_done just made done, run only for those that
-- have dependents (settle_done says which: one probe of deps' key per job, not a statement).
UPDATE jobs SET state = 'pending', due = max(due, :now)
WHERE state = 'blocked'
  AND seq IN (SELECT child_seq FROM json_each(:seqs) AS settled CROSS JOIN deps ON deps.parent_seq = settled.value)
  AND NOT EXISTS (
      SELECT 1 FROM deps d JOIN jobs p ON p.seq = d.parent_seq
      WHERE d.child_seq = jobs.seq AND p.state != 'done'
  )
RETURNING queue

-- The dashboard's and metrics' statements (issue 16; see views.py).

-- name: paused_queues
SELECT queue FROM paused ORDER BY queue

-- name: pause
INSERT OR IGNORE INTO paused (queue) VALUES (?)

-- name: resume
DELETE FROM paused WHERE queue = ?

-- name: browse
-- views.py fills the WHERE placeholder from the fixed conditions below. Newest first is seq
-- descending (the rowid: enqueue order), walked on the table itself.
SELECT * FROM jobs WHERE {where} ORDER BY seq DESC LIMIT :limit

-- name: browse_ends
-- Two subqueries: SQLite reads min() or max() alone off the b-tree's edge, both at once by a scan.
SELECT coalesce((SELECT min(seq) FROM jobs), 0), coalesce((SELECT max(seq) FROM jobs), 0)

-- name: browse_after
seq < :after

-- name: browse_window
seq >= :floor

-- name: browse_state
state = :stored

-- name: browse_split
(CASE WHEN :split = 'scheduled' THEN due > :now ELSE due <= :now END)

-- name: browse_queue
queue = :queue

-- name: browse_task
task = :task

-- name: browse_text
(substr(id, 1, length(:text)) = :text OR instr(payload, :text) > 0
 OR (error IS NOT NULL AND instr(error, :text) > 0))

-- name: dependents
SELECT j.* FROM deps d JOIN jobs j ON j.seq = d.child_seq
WHERE d.parent_seq = (SELECT seq FROM jobs WHERE id = :id)
ORDER BY j.seq LIMIT :limit

-- name: steps_by_id
SELECT s.name, s.value FROM steps s JOIN jobs j ON j.seq = s.job_seq WHERE j.id = ?

-- name: job_counts
-- blocked and the final states, kept by triggers (schema.sql, migration 3).
SELECT queue, state, n FROM job_counts
WHERE n > 0 AND state IN ('blocked', 'done', 'failed', 'cancelled')

-- name: past_lease
-- Running jobs whose lease expired and that no reaper has returned yet (reap takes <= now).
SELECT queue, count(*) FROM jobs INDEXED BY jobs_running
WHERE state = 'running' AND lease_expires <= :now GROUP BY queue

-- name: running_counts
SELECT queue, count(*) FROM jobs INDEXED BY jobs_running WHERE state = 'running' GROUP BY queue

-- name: pending_split
-- Per queue: pending jobs, those not yet due (scheduled), and the oldest due time of those due.
-- Walks the pending rows of jobs_claim (10^5 waiting jobs: a few tens of milliseconds).
SELECT queue, count(*), sum(due > :now), min(CASE WHEN due <= :now THEN due END)
FROM jobs INDEXED BY jobs_claim WHERE state = 'pending' GROUP BY queue

-- name: finished_series
SELECT :since + CAST((ended_at - :since) / :step AS INTEGER) * :step AS bucket, outcome, count(*)
FROM executions
WHERE ended_at >= :since AND ended_at <= :now
GROUP BY bucket, outcome
ORDER BY bucket, outcome

-- name: execution_stats
-- exec_stats is kept by triggers (schema.sql, migration 2): a few thousand rows at most.
SELECT queue, outcome, upto, n, seconds FROM exec_stats WHERE n > 0 ORDER BY queue, outcome, upto

-- name: finished_minutes
-- A long window's series from exec_minutes (kept by triggers): each minute counts in the bucket
-- its start falls in (the bucket of `since` for the minute that holds it).
SELECT max(minute, :since), outcome, n FROM exec_minutes
WHERE minute >= CAST(:since / 60 AS INTEGER) * 60 AND minute <= :now AND n > 0

-- name: beat
INSERT INTO workers (host, pid, queues, slots, busy, started_at, seen_at)
VALUES (:host, :pid, :queues, :slots, :busy, :started_at, :now)
ON CONFLICT (host, pid) DO UPDATE SET
    queues = excluded.queues, slots = excluded.slots, busy = excluded.busy,
    started_at = excluded.started_at, seen_at = excluded.seen_at

-- name: workers
SELECT host, pid, queues, slots, busy, started_at, seen_at FROM workers ORDER BY host, pid

-- name: drop_workers
DELETE FROM workers WHERE seen_at < :before

-- name: until_due
-- Seconds until the earliest pending job of these queues that is not due yet falls due (NULL:
-- none), for `wait` ("timed"). A skip scan of jobs_claim (queue, priority DESC, due): per
-- queue, one index probe per priority present and one for its earliest due time after now,
-- however many jobs wait (10^5 waiting jobs: about 35 us).
WITH RECURSIVE pr(queue, p) AS (
    SELECT q.value, (SELECT max(priority) FROM jobs WHERE state = 'pending' AND queue = q.value)
    FROM json_each(:queues) AS q
    UNION ALL
    SELECT pr.queue, (SELECT max(priority) FROM jobs
                      WHERE state = 'pending' AND queue = pr.queue AND priority < pr.p)
    FROM pr WHERE pr.p IS NOT NULL
)
SELECT min((SELECT min(due) FROM jobs
            WHERE state = 'pending' AND queue = pr.queue AND priority = pr.p AND due > :now)) - :now
FROM pr WHERE pr.p IS NOT NULL
