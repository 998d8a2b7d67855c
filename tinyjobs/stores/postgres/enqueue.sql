-- The single enqueue's statements sent through oneflush.py (libpq's $n parameters, prepared
-- once per connection). {schema}-style placeholders as in queries.sql.

-- name: enqueue_one
-- One job without parents, as queries.sql's enqueue_one (same rules: a key held by a live job,
-- or an id held by any job, adds nothing and returns no row; the caller then finds the holder,
-- or replaces a final job the batch way), but returning only the clock it was written with:
-- the caller builds the snapshot from what it sent (rules.created_snapshot), as bulk.py does.
-- Columns left to their defaults: seq (m004), attempts, after_ids, cancel_requested, and the
-- NULLs. Parameters: $1 id, $2 task, $3 queue, $4 payload, $5 priority, $6 delay, $7 at,
-- $8 max_attempts, $9 key, $10 group, $11 dedupe, $12 keep, $13 now (NULL: the transaction's).
WITH t AS (SELECT COALESCE($13::float8, extract(epoch FROM now())::float8) AS now)
INSERT INTO {jobs} (id, task, queue, payload, priority, due, state, max_attempts,
    attempt_budget, key, grp, dedupe, keep, created_at)
SELECT $1, $2, $3, $4, $5, COALESCE($7, t.now + $6), 'pending', $8, $8, $9, $10, $11, $12, t.now
FROM t
WHERE $9::text IS NULL OR NOT EXISTS (
    SELECT 1 FROM {jobs} k WHERE k.key = $9 AND k.state IN ('pending', 'blocked', 'running'))
ON CONFLICT (id) DO NOTHING
RETURNING created_at

-- name: wake_one
-- queries.sql's notify_one: the wake-up of one queue in a transaction of its own that commits
-- without waiting for the WAL flush ($1 the channel, $2 the queue).
SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)

-- name: begin
BEGIN

-- name: commit
COMMIT

-- name: raise_sync_commit
SELECT set_config('synchronous_commit', 'on', true)
WHERE current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')
