-- tinyjobs PostgreSQL schema, version 2: the dashboard and metrics (issue 16).
-- Paused queues (LIM-04), worker heartbeats, and the indexes that browse and the finished-jobs
-- series walk. browse pages newest first by (created_at, id), alone or within one state or one
-- queue; ids compare bytewise (COLLATE "C"), as on the other stores. created_at and queue
-- never change: these are written once per job.

CREATE TABLE {paused} (
    queue text PRIMARY KEY
);

CREATE TABLE {workers} (
    host text NOT NULL,
    pid integer NOT NULL,
    queues text[] NOT NULL,
    slots integer NOT NULL,
    busy integer NOT NULL,
    started_at double precision NOT NULL,
    seen_at double precision NOT NULL,
    PRIMARY KEY (host, pid)
);

CREATE INDEX jobs_browse ON {jobs} (created_at, id COLLATE "C");
CREATE INDEX jobs_browse_queue ON {jobs} (queue, created_at, id COLLATE "C");
-- A state filter on the rare states walks this; on done, pending or running, jobs_browse (those
-- states are the bulk of the newest jobs). No index on every state: it would move an entry at
-- each claim and settlement.
CREATE INDEX jobs_browse_rare ON {jobs} (state, created_at, id COLLATE "C")
    WHERE state IN ('failed', 'cancelled', 'blocked');
-- dependents: the jobs whose after_ids name a job (only rows that have any are indexed).
CREATE INDEX jobs_after ON {jobs} USING gin (after_ids) WHERE cardinality(after_ids) > 0;
CREATE INDEX executions_ended ON {executions} (ended_at) WHERE ended_at IS NOT NULL;
