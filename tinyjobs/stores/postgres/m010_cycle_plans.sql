-- tinyjobs PostgreSQL schema, version 10: the worker's cycle functions (m007's claim_free, m008's
-- settle_claim) plan every statement as index probes, whatever the table's size when they are
-- planned (issue 14, docs/measured.md "pg-suite").
-- Their statements run with generic plans (plan_cache_mode), made once per session, at a
-- backend's first call, from the planner's estimates of the tables then. Without statistics
-- (a new schema; a cluster whose autovacuum is off or has not analyzed yet) those come from the
-- tables' current sizes, and two plans that read everything were chosen and kept:
--   * a worker that starts on a small table (a low rate, or a first call with a few thousand
--     jobs waiting) leased its claimed jobs through a sequential scan of the whole jobs table
--     (`WHERE j.id = ANY(v_ids)` on a table estimated at a few pages): every claim then read
--     every row the table holds, finished ones included, more as the store grows;
--   * a drain of fewer than ~8,000 waiting jobs settled through a bitmap scan of the whole
--     jobs_running index joined by hash to the settlements (the index was estimated at ~11
--     entries): that index keeps an entry for every job that ran until VACUUM removes it (a
--     bitmap scan cannot mark dead entries), so each settlement read all the earlier ones,
--     and a drain's buffer reads per cycle doubled from its first cycles to its 500th.
-- With sequential scans, bitmap scans, hash and merge joins off inside these two functions,
-- each statement finds its rows by index probes (the settlements by their token, the claimed
-- jobs by id, the dependents by deps' keys), which cost the same however many jobs the table
-- holds; the claim's own scan of jobs_claim was an index scan already. The settings are the
-- functions' own (SET clauses: saved and restored around each call), so no other statement of
-- the session plans with them. An empty deps table is then probed by its index rather than
-- read in one sequential scan (about two buffer reads per settled job more in a drain; the same
-- scan of a deps table holding many rows read all of them at every cycle).
--
-- Rolling upgrade: this changes no function's text, arguments or rows, only how they plan:
-- workers of an older version call the same functions and get the same plans. A later
-- migration that replaces either function (CREATE OR REPLACE FUNCTION) replaces its settings
-- too and must give them again (tests/integration/test_postgres_cycle_plans.py checks them).

ALTER FUNCTION {schema}.settle_claim(text[], text[], text[], text[], text[], float8[], text[],
    text[], float8[], text[], integer, text, float8, text)
    SET enable_seqscan = off SET enable_bitmapscan = off
    SET enable_hashjoin = off SET enable_mergejoin = off;

ALTER FUNCTION {schema}.claim_free(text[], float8[], text[], integer, text, float8, text)
    SET enable_seqscan = off SET enable_bitmapscan = off
    SET enable_hashjoin = off SET enable_mergejoin = off;
