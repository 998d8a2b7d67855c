-- tinyjobs PostgreSQL schema, version 1. {schema} is the quoted schema name (psycopg.sql).
-- Times are epoch seconds (double precision), judged by the server's clock unless a caller
-- passes its own (CLK-01). Limits count running rows and execution starts (LIM-01, LIM-02).

CREATE SEQUENCE {schema}.job_seq;

CREATE TABLE {schema}.jobs (
    id text PRIMARY KEY,
    task text NOT NULL,
    queue text NOT NULL,
    payload text NOT NULL,
    priority integer NOT NULL DEFAULT 0,
    due double precision NOT NULL,
    seq bigint NOT NULL,
    state text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    attempt_budget integer NOT NULL,
    key text,
    grp text,
    after_ids text[] NOT NULL DEFAULT ARRAY[]::text[],
    dedupe double precision NOT NULL,
    keep double precision NOT NULL,
    error text,
    result text,
    created_at double precision NOT NULL,
    started_at double precision,
    finished_at double precision,
    expires_at double precision,
    cancel_requested boolean NOT NULL DEFAULT false,
    token text,
    last_token text,
    lease_expires double precision,
    lease_seconds double precision,
    holder text
);

CREATE INDEX jobs_claim ON {schema}.jobs (queue, priority DESC, due, seq) WHERE state = 'pending';
CREATE UNIQUE INDEX jobs_key ON {schema}.jobs (key)
    WHERE key IS NOT NULL AND state IN ('pending', 'blocked', 'running');
CREATE UNIQUE INDEX jobs_token ON {schema}.jobs (token) WHERE token IS NOT NULL;
CREATE INDEX jobs_running ON {schema}.jobs (lease_expires) WHERE state = 'running';
CREATE INDEX jobs_expires ON {schema}.jobs (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX jobs_seq ON {schema}.jobs (seq);

CREATE TABLE {schema}.executions (
    id bigserial PRIMARY KEY,
    job_id text NOT NULL,
    queue text NOT NULL,
    grp text,
    attempt integer NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at double precision NOT NULL,
    ended_at double precision,
    outcome text,
    error text
);
CREATE INDEX executions_job ON {schema}.executions (job_id);
CREATE INDEX executions_starts ON {schema}.executions (queue, started_at);

CREATE TABLE {schema}.steps (
    job_id text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (job_id, name)
);

CREATE TABLE {schema}.deps (
    parent_id text NOT NULL,
    job_id text NOT NULL,
    PRIMARY KEY (parent_id, job_id)
);
CREATE INDEX deps_job ON {schema}.deps (job_id);

CREATE TABLE {schema}.cron (
    schedule text PRIMARY KEY,
    last_due double precision NOT NULL
);

CREATE TABLE {schema}.leaders (
    name text PRIMARY KEY,
    holder text NOT NULL,
    expires double precision NOT NULL
);
