-- tinyjobs PostgreSQL schema, version 9: the dashboard's browse by `seq` (enqueue order), one
-- index for both of its views instead of two (issue 14), as SQLite's migration 3 did.
-- Neither a claim nor a settlement is a HOT update, so each writes an entry in every index of
-- the row whose predicate it meets: jobs_browse (created_at, id) and jobs_browse_queue (queue,
-- created_at, id) took two of the four entries of each claim, each settlement and each enqueue.
-- jobs_seq (seq) takes one: browse walks it newest first and stops at the page; filtered by
-- queue, task, text or a common state it reads at most views.WINDOW seqs per call and returns a
-- short page with a cursor when those hold too few matches (docs/store-contract.md: a store may
-- bound what one call reads when filtered), so that no browse grows with the finished jobs.
-- The rare states keep an index of their own, now ordered by seq: a failed job is found without
-- a window however old it is.
--
-- seq is the job's enqueue order: every enqueue (single, bulk through COPY, a replaced id)
-- takes nextval, so newest first by seq is newest first by (created_at, id) whenever created_at
-- grows with the enqueues and a batch's ids are given ascending (the contract's wording).
--
-- Rolling upgrade: no statement of the worker's path names these indexes. A dashboard of an
-- older version still browses by (created_at, id): with its indexes gone it sorts the rows its
-- filter keeps, on every page, until it is upgraded.

-- IF EXISTS and IF NOT EXISTS: applying this again (a test that takes a schema back to an older
-- version) leaves the same indexes.
DROP INDEX IF EXISTS {schema}.jobs_browse;
DROP INDEX IF EXISTS {schema}.jobs_browse_queue;
DROP INDEX IF EXISTS {schema}.jobs_browse_rare;
CREATE INDEX IF NOT EXISTS jobs_seq ON {jobs} (seq);
CREATE INDEX jobs_browse_rare ON {jobs} (state, seq) WHERE state IN ('failed', 'cancelled', 'blocked');
