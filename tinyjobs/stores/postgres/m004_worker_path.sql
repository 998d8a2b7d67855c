-- tinyjobs PostgreSQL schema, version 4: fewer index entries per job on the worker's path.
-- Neither claim nor settlement can be a HOT update (state, token and lease_expires are indexed
-- or in index predicates), so each writes an entry in every index of the row: each index
-- dropped here is one entry less per enqueue, claim and settlement.

-- The job sequence as seq's default, so that a bulk enqueue through COPY (bulk.py) numbers its
-- rows in stream order without naming the column.
ALTER TABLE {jobs} ALTER COLUMN seq SET DEFAULT nextval({seq});

-- No statement walks seq in order: `jobs` sorts by seq times a direction (no index serves
-- that), claims and `ahead` read jobs_claim, the dashboard reads its browse indexes.
DROP INDEX {schema}.jobs_seq;

-- One index of live leases instead of two: a token is set exactly while its job is running,
-- so the unique (token) WHERE state = 'running' fences as jobs_token did (settle, renew,
-- save_step find their job by it), and the reaper's, end_leases' and the limits' scans of
-- running jobs walk it whole, which costs what the running jobs are, never the finished ones.
DROP INDEX {schema}.jobs_token;
DROP INDEX {schema}.jobs_running;
CREATE UNIQUE INDEX jobs_running ON {jobs} (token) WHERE state = 'running';
