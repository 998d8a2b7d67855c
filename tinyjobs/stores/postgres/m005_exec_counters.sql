-- tinyjobs PostgreSQL schema, version 5: counters of the ended executions (issue 16), so that
-- execution_stats and a day's finished_series read a few thousand rows instead of every
-- execution (at 10^6: 480 ms and 780 ms before).
--
-- Kept in the same statements that end or delete executions (queries.sql: the `tally`
-- fragment in settle, end_leases and forget, and enqueue_one's replacement), so they are
-- exactly the executions on record whatever clock the callers pass. Each row is keyed also by
-- a shard, the writing backend's pid modulo 16: a settlement locks only its own backend's rows
-- until it commits, so workers on other connections never wait on each other's counter row
-- (readers sum the shards). A decrement goes to the deleting backend's shard, which may make
-- that shard's row negative: only the sums mean anything.
--
-- exec_stats: per (queue, outcome, upto), upto the duration (ended_at - started_at, at least 0)
-- rounded up to 1 ms when at most 1 s, to 10 ms when at most 10 s, to 1 s beyond: SQLite's
-- rule (its schema.sql, migration 2), so that a bound that is a whole number of those units
-- (every bucket of /metrics) counts exactly. n and the sum of the durations.
-- exec_minutes: per (minute, outcome), minute the start of the minute that holds ended_at
-- (the largest multiple of 60 not above it, corrected where the float division rounds).

CREATE TABLE {exec_stats} (
    queue text NOT NULL,
    outcome text NOT NULL,
    upto double precision NOT NULL,
    shard smallint NOT NULL,
    n bigint NOT NULL,
    seconds double precision NOT NULL,
    PRIMARY KEY (queue, outcome, upto, shard)
);

CREATE TABLE {exec_minutes} (
    minute double precision NOT NULL,
    outcome text NOT NULL,
    shard smallint NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (minute, outcome, shard)
);

-- The backfill, atomic with the tables (migrate.py runs every pending migration in one
-- transaction): SHARE blocks every write to executions until this commits, so no execution
-- ends or goes between the counts read here and the first statement that keeps them.
LOCK TABLE {executions} IN SHARE MODE;

INSERT INTO {exec_stats} (queue, outcome, upto, shard, n, seconds)
SELECT queue, outcome, upto, 0, count(*), sum(d)
FROM (SELECT queue, outcome, d,
        CASE WHEN d <= 1 THEN ceil(d * 1000) / 1000
             WHEN d <= 10 THEN ceil(d * 100) / 100
             ELSE ceil(d) END AS upto
      FROM (SELECT queue, outcome, greatest(ended_at - started_at, 0) AS d
            FROM {executions} WHERE ended_at IS NOT NULL AND outcome IS NOT NULL) e) x
GROUP BY 1, 2, 3;

INSERT INTO {exec_minutes} (minute, outcome, shard, n)
SELECT minute, outcome, 0, count(*)
FROM (SELECT outcome,
        CASE WHEN m > ended_at THEN m - 60 WHEN m + 60 <= ended_at THEN m + 60 ELSE m END
            AS minute
      FROM (SELECT outcome, ended_at, floor(ended_at / 60) * 60 AS m
            FROM {executions} WHERE ended_at IS NOT NULL AND outcome IS NOT NULL) e) x
GROUP BY 1, 2;
