-- The SQLite store's schema, as numbered migrations applied in order on open.
-- Each `-- migration: N` block runs once, inside the BEGIN IMMEDIATE transaction that also
-- records N in schema_version, so two processes opening one file at once cannot both run it.
-- Never edit a released block: add a new one.

-- migration: 1
CREATE TABLE jobs (
    -- seq is the rowid: enqueue order, each new job above every existing one (a replaced id
    -- gets a later seq). No AUTOINCREMENT: its sqlite_sequence row would be one more page
    -- written and synced per enqueue; a seq freed by deleting the newest job may come back,
    -- but its steps, executions and deps went with it. They hang off seq, not id, because
    -- an id can be reused once its job failed or was cancelled.
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    task TEXT NOT NULL,
    queue TEXT NOT NULL,
    payload TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    due REAL NOT NULL,
    state TEXT NOT NULL,             -- pending, blocked, running, done, failed, cancelled
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    attempt_budget INTEGER NOT NULL,
    key TEXT,
    grp TEXT,
    after_ids TEXT,                  -- JSON list of the ids it runs after, NULL when none
    dedupe REAL NOT NULL,
    keep REAL NOT NULL,
    error TEXT,
    result TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    expires_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    token TEXT,
    lease_expires REAL,
    lease_seconds REAL,
    holder TEXT
);

-- The claim walks this index in claim order and stops at the limit; only pending rows are in it.
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, due, seq) WHERE state = 'pending';
-- A dedup key is held by at most one live job (JOB-09).
CREATE UNIQUE INDEX jobs_live_key ON jobs (key)
    WHERE key IS NOT NULL AND state IN ('pending', 'blocked', 'running');
-- Running jobs: concurrency counts, reaping, renewals by token, holders of a dead process.
CREATE INDEX jobs_running ON jobs (queue, grp) WHERE state = 'running';
CREATE INDEX jobs_lease ON jobs (lease_expires) WHERE state = 'running';
CREATE INDEX jobs_token ON jobs (token) WHERE token IS NOT NULL;
CREATE INDEX jobs_holder ON jobs (holder) WHERE holder IS NOT NULL;
-- Final jobs by the time purge may remove them.
CREATE INDEX jobs_expires ON jobs (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE steps (
    job_seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (job_seq, name)
) WITHOUT ROWID;

CREATE TABLE executions (
    id INTEGER PRIMARY KEY,
    job_seq INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    outcome TEXT,
    error TEXT,
    -- queue and grp are copied here: an execution's start is the record rate limits count.
    queue TEXT NOT NULL,
    grp TEXT
);
CREATE INDEX executions_job ON executions (job_seq);
CREATE INDEX executions_starts ON executions (queue, started_at);

-- A job that runs after others (DEP-01): one row per (parent, child).
CREATE TABLE deps (
    parent_seq INTEGER NOT NULL,
    child_seq INTEGER NOT NULL,
    PRIMARY KEY (parent_seq, child_seq)
) WITHOUT ROWID;
CREATE INDEX deps_child ON deps (child_seq);

CREATE TABLE cron (
    schedule TEXT PRIMARY KEY,
    last_due REAL NOT NULL
) WITHOUT ROWID;

CREATE TABLE leaders (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires REAL NOT NULL
) WITHOUT ROWID;

-- migration: 2
-- The dashboard and metrics (issue 16): paused queues (LIM-04), worker heartbeats, jobs per
-- queue and state, and the indexes that browse and the finished-jobs series walk.
CREATE TABLE paused (
    queue TEXT PRIMARY KEY
) WITHOUT ROWID;

CREATE TABLE workers (
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    queues TEXT NOT NULL,            -- JSON list
    slots INTEGER NOT NULL,
    busy INTEGER NOT NULL,
    started_at REAL NOT NULL,
    seen_at REAL NOT NULL,
    PRIMARY KEY (host, pid)
) WITHOUT ROWID;

-- Jobs per (queue, stored state), kept by triggers, so that queue_stats reads a few rows
-- instead of counting a million. A trigger's update touches one small, always-cached page per
-- transaction (an index on state would move an entry per job and state change instead).
CREATE TABLE job_counts (
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;
INSERT INTO job_counts (queue, state, n) SELECT queue, state, count(*) FROM jobs GROUP BY queue, state;
CREATE TRIGGER job_counts_insert AFTER INSERT ON jobs BEGIN
    INSERT OR IGNORE INTO job_counts (queue, state, n) VALUES (new.queue, new.state, 0);
    UPDATE job_counts SET n = n + 1 WHERE queue = new.queue AND state = new.state;
END;
CREATE TRIGGER job_counts_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;
CREATE TRIGGER job_counts_update AFTER UPDATE OF state ON jobs WHEN old.state != new.state BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT OR IGNORE INTO job_counts (queue, state, n) VALUES (new.queue, new.state, 0);
    UPDATE job_counts SET n = n + 1 WHERE queue = new.queue AND state = new.state;
END;

-- Ended executions per (queue, outcome, duration rounded up to 1 ms under 1 s, 10 ms under
-- 10 s, 1 s beyond), and per (minute, outcome), kept by triggers: execution_stats and a long
-- finished_series read these instead of every execution. `upto` is exact for every bound that
-- is a whole number of those units (all of /metrics' buckets). ceil() without the math
-- functions, which not every SQLite has: CAST truncates, the comparison adds the remainder.
ALTER TABLE executions ADD COLUMN seconds REAL
    GENERATED ALWAYS AS (max(ended_at - started_at, 0)) VIRTUAL;
ALTER TABLE executions ADD COLUMN upto REAL GENERATED ALWAYS AS (
    CASE WHEN seconds <= 1
         THEN (CAST(seconds * 1000 AS INTEGER) + (seconds * 1000 > CAST(seconds * 1000 AS INTEGER))) / 1000.0
         WHEN seconds <= 10
         THEN (CAST(seconds * 100 AS INTEGER) + (seconds * 100 > CAST(seconds * 100 AS INTEGER))) / 100.0
         ELSE (CAST(seconds AS INTEGER) + (seconds > CAST(seconds AS INTEGER))) * 1.0 END
) VIRTUAL;
ALTER TABLE executions ADD COLUMN minute INTEGER
    GENERATED ALWAYS AS (CAST(ended_at / 60 AS INTEGER) * 60) VIRTUAL;

CREATE TABLE exec_stats (
    queue TEXT NOT NULL,
    outcome TEXT NOT NULL,
    upto REAL NOT NULL,
    n INTEGER NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (queue, outcome, upto)
) WITHOUT ROWID;
CREATE TABLE exec_minutes (
    minute INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (minute, outcome)
) WITHOUT ROWID;
INSERT INTO exec_stats (queue, outcome, upto, n, seconds)
SELECT queue, outcome, upto, count(*), sum(seconds) FROM executions
WHERE ended_at IS NOT NULL GROUP BY 1, 2, 3;
INSERT INTO exec_minutes (minute, outcome, n)
SELECT minute, outcome, count(*) FROM executions WHERE ended_at IS NOT NULL GROUP BY 1, 2;
CREATE TRIGGER exec_stats_end AFTER UPDATE OF ended_at ON executions
WHEN old.ended_at IS NULL AND new.ended_at IS NOT NULL BEGIN
    INSERT OR IGNORE INTO exec_stats (queue, outcome, upto, n, seconds)
    VALUES (new.queue, new.outcome, new.upto, 0, 0);
    UPDATE exec_stats SET n = n + 1, seconds = seconds + new.seconds
    WHERE queue = new.queue AND outcome = new.outcome AND upto = new.upto;
    INSERT OR IGNORE INTO exec_minutes (minute, outcome, n) VALUES (new.minute, new.outcome, 0);
    UPDATE exec_minutes SET n = n + 1 WHERE minute = new.minute AND outcome = new.outcome;
END;
-- tinyjobs inserts executions open, but the rollups must not depend on it.
CREATE TRIGGER exec_stats_insert AFTER INSERT ON executions WHEN new.ended_at IS NOT NULL BEGIN
    INSERT OR IGNORE INTO exec_stats (queue, outcome, upto, n, seconds)
    VALUES (new.queue, new.outcome, new.upto, 0, 0);
    UPDATE exec_stats SET n = n + 1, seconds = seconds + new.seconds
    WHERE queue = new.queue AND outcome = new.outcome AND upto = new.upto;
    INSERT OR IGNORE INTO exec_minutes (minute, outcome, n) VALUES (new.minute, new.outcome, 0);
    UPDATE exec_minutes SET n = n + 1 WHERE minute = new.minute AND outcome = new.outcome;
END;
CREATE TRIGGER exec_stats_delete AFTER DELETE ON executions WHEN old.ended_at IS NOT NULL BEGIN
    UPDATE exec_stats SET n = n - 1, seconds = seconds - old.seconds
    WHERE queue = old.queue AND outcome = old.outcome AND upto = old.upto;
    UPDATE exec_minutes SET n = n - 1 WHERE minute = old.minute AND outcome = old.outcome;
END;

-- browse pages newest first by (created_at, id), alone or within one queue (created_at and
-- queue never change: written once per job). A state filter on the rare states walks
-- jobs_browse_rare; on done, pending or running it walks jobs_browse and keeps the matches
-- (those states are the bulk of the newest jobs). No index on every state: it would move an
-- entry at each claim and settlement (measured: the worker cycle at about half speed).
CREATE INDEX jobs_browse ON jobs (created_at, id);
CREATE INDEX jobs_browse_queue ON jobs (queue, created_at, id);
CREATE INDEX jobs_browse_rare ON jobs (state, created_at, id)
    WHERE state IN ('failed', 'cancelled', 'blocked');
CREATE INDEX executions_ended ON executions (ended_at, outcome) WHERE ended_at IS NOT NULL;

-- migration: 3
-- Migration 2's browse indexes and per-insert count triggers cost enqueue a third of its bulk
-- rate (docs/measured.md). Nothing the dashboard needs is written per enqueue any more (a
-- trigger or partial index on jobs, even one whose WHEN is false, costs each insert about a
-- sixth more instructions: measured with callgrind):
-- - browse walks the rowid (seq: enqueue order) newest first; a filter reads a bounded window
--   of seqs per call (views.py).
-- - job_counts holds blocked and the final states (done, failed, cancelled), kept by triggers
--   that fire when a job reaches or leaves one (a settlement, a retry, a purge, a delete): one
--   small-page update per finished job, none per enqueue or claim. A job enqueued blocked or
--   already cancelled (after a failed job, DEP-01) is counted by the trigger on its first deps
--   row: only jobs with parents pay it. pending and running are counted on their partial
--   indexes (jobs_claim, jobs_running) at each read.
DROP INDEX jobs_browse;
DROP INDEX jobs_browse_queue;
DROP INDEX jobs_browse_rare;
DROP TRIGGER job_counts_insert;
DROP TRIGGER job_counts_delete;
DROP TRIGGER job_counts_update;
DELETE FROM job_counts WHERE state NOT IN ('blocked', 'done', 'failed', 'cancelled');
CREATE TRIGGER job_counts_born AFTER INSERT ON deps
WHEN NOT EXISTS (SELECT 1 FROM deps WHERE child_seq = new.child_seq AND parent_seq != new.parent_seq)
BEGIN
    INSERT OR IGNORE INTO job_counts (queue, state, n)
    SELECT queue, state, 0 FROM jobs
    WHERE seq = new.child_seq AND state IN ('blocked', 'done', 'failed', 'cancelled');
    UPDATE job_counts SET n = n + 1
    WHERE (queue, state) = (SELECT queue, state FROM jobs WHERE seq = new.child_seq);
END;
CREATE TRIGGER job_counts_reached AFTER UPDATE OF state ON jobs
WHEN new.state IN ('blocked', 'done', 'failed', 'cancelled') AND new.state != old.state BEGIN
    INSERT OR IGNORE INTO job_counts (queue, state, n) VALUES (new.queue, new.state, 0);
    UPDATE job_counts SET n = n + 1 WHERE queue = new.queue AND state = new.state;
END;
CREATE TRIGGER job_counts_left AFTER UPDATE OF state ON jobs
WHEN old.state IN ('blocked', 'done', 'failed', 'cancelled') AND new.state != old.state BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;
CREATE TRIGGER job_counts_gone AFTER DELETE ON jobs
WHEN old.state IN ('blocked', 'done', 'failed', 'cancelled') BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;

-- migration: 4
-- The worker's path (issue 14): migration 3's count triggers test the state with an IN list
-- of four constants, which SQLite evaluates through an ephemeral table built afresh at every
-- firing (a constant list of more than two values; OP_Once is per trigger frame): two such
-- firings per claimed and per settled job, the largest single cost of the claim and the
-- settlement (callgrind: a quarter of the instructions of a drain). The same tests written
-- as comparisons build nothing. Same conditions, same counts; the triggers that run at every
-- settlement add with one upsert instead of INSERT OR IGNORE then UPDATE (one seek, not two).
DROP TRIGGER job_counts_born;
DROP TRIGGER job_counts_reached;
DROP TRIGGER job_counts_left;
DROP TRIGGER job_counts_gone;
CREATE TRIGGER job_counts_born AFTER INSERT ON deps
WHEN NOT EXISTS (SELECT 1 FROM deps WHERE child_seq = new.child_seq AND parent_seq != new.parent_seq)
BEGIN
    INSERT OR IGNORE INTO job_counts (queue, state, n)
    SELECT queue, state, 0 FROM jobs
    WHERE seq = new.child_seq
      AND (state = 'blocked' OR state = 'done' OR state = 'failed' OR state = 'cancelled');
    UPDATE job_counts SET n = n + 1
    WHERE (queue, state) = (SELECT queue, state FROM jobs WHERE seq = new.child_seq);
END;
CREATE TRIGGER job_counts_reached AFTER UPDATE OF state ON jobs
WHEN (new.state = 'blocked' OR new.state = 'done' OR new.state = 'failed' OR new.state = 'cancelled')
     AND new.state != old.state BEGIN
    INSERT INTO job_counts (queue, state, n) VALUES (new.queue, new.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_left AFTER UPDATE OF state ON jobs
WHEN (old.state = 'blocked' OR old.state = 'done' OR old.state = 'failed' OR old.state = 'cancelled')
     AND new.state != old.state BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;
CREATE TRIGGER job_counts_gone AFTER DELETE ON jobs
WHEN old.state = 'blocked' OR old.state = 'done' OR old.state = 'failed' OR old.state = 'cancelled' BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;

-- Running jobs: one index instead of four (jobs_running, jobs_lease, jobs_token, jobs_holder).
-- A claim wrote an entry in each and its settlement took them out again: four b-trees, four
-- pages in every commit of the worker's cycle. A token is set exactly while its job runs, so
-- renew and save_step still find their job by it (the key's first column); the scans by queue,
-- group, holder and lease (limits, reaping, a dead worker's leases, the dashboard's counts) walk
-- this index whole, all in it: what they cost is what runs, never the finished jobs.
DROP INDEX jobs_running;
DROP INDEX jobs_lease;
DROP INDEX jobs_token;
DROP INDEX jobs_holder;
CREATE INDEX jobs_running ON jobs (token, queue, grp, holder, lease_expires) WHERE state = 'running';

-- Ended executions: the same rollups, each kept by one upsert (exec_stats_insert, for an
-- execution inserted already ended, stays as it is: its WHEN is false on tinyjobs' inserts).
DROP TRIGGER exec_stats_end;
CREATE TRIGGER exec_stats_end AFTER UPDATE OF ended_at ON executions
WHEN old.ended_at IS NULL AND new.ended_at IS NOT NULL BEGIN
    INSERT INTO exec_stats (queue, outcome, upto, n, seconds)
    VALUES (new.queue, new.outcome, new.upto, 1, new.seconds)
    ON CONFLICT (queue, outcome, upto) DO UPDATE SET n = n + 1, seconds = seconds + excluded.seconds;
    INSERT INTO exec_minutes (minute, outcome, n) VALUES (new.minute, new.outcome, 1)
    ON CONFLICT (minute, outcome) DO UPDATE SET n = n + 1;
END;

-- migration: 5
-- The execution row written once, when the attempt ends (issue 14), as the PostgreSQL store's
-- m006: the claim no longer inserts an open row that the settlement then updates. While an
-- attempt runs the job's row describes it (attempts, started_at, holder: "<host>|<pid>|<start>");
-- the settlement, the reaper and end_leases insert the ended row (lifecycle.record_execution),
-- so every insert now fires exec_stats_insert: the same rollups by one upsert each, as
-- migration 4 made exec_stats_end (INSERT OR IGNORE then UPDATE sought each row twice).
-- Open rows written by an older version's claim (running at upgrade time, or a worker of the
-- older version still running) stay: the settlement closes such a row instead of inserting one,
-- `executions` shows it instead of the job's row, and a rate limit counts that attempt twice
-- (fewer starts let through, never more). Not handled: an older reaper ending a lease a newer
-- worker took finds no open row to close, and that attempt goes unrecorded.
DROP TRIGGER exec_stats_insert;
CREATE TRIGGER exec_stats_insert AFTER INSERT ON executions WHEN new.ended_at IS NOT NULL BEGIN
    INSERT INTO exec_stats (queue, outcome, upto, n, seconds)
    VALUES (new.queue, new.outcome, new.upto, 1, new.seconds)
    ON CONFLICT (queue, outcome, upto) DO UPDATE SET n = n + 1, seconds = seconds + excluded.seconds;
    INSERT INTO exec_minutes (minute, outcome, n) VALUES (new.minute, new.outcome, 1)
    ON CONFLICT (minute, outcome) DO UPDATE SET n = n + 1;
END;

-- migration: 6
-- `jobs` of one state, oldest or newest first (issue 14): the statement walked the table by seq
-- and kept the rows in that state, so a page of the waiting jobs oldest first read every job
-- enqueued before them (10^6 jobs: 130 ms; twice that with 1 KiB pages). This index holds every
-- job that is not running, by state then seq: a page of one state costs the rows it returns.
-- `due` rides along so that waiting and scheduled (pending jobs told apart by due and now) are
-- told apart on the index, without reading the rows of the other kind (a job's due changes only
-- together with its state). Running jobs are in jobs_running already; leaving them out saves
-- the claim and the settlement a move each (an enqueue puts one entry in, a claim takes one
-- out, a settlement puts one in). The condition is written as comparisons (an IN list is an
-- ephemeral table per row written, as migration 4 says), and a statement must name its state
-- as a constant for SQLite to use the index (store.jobs). IF NOT EXISTS: a file set back to an
-- older version (as the tests of migration 5 do) takes this block again.
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, seq, due)
    WHERE state = 'pending' OR state = 'done' OR state = 'failed' OR state = 'cancelled'
       OR state = 'blocked';
