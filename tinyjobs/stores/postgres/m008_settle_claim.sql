-- tinyjobs PostgreSQL schema, version 8: the worker's cycle (settle what finished, claim the
-- next jobs) as one function, for queues without limits (issue 14). In a drain the cycle was a
-- pipeline of six statements in two round trips: BEGIN, the pause locks, the settle,
-- with_dependents and the claim, then, once the settle's rows were read, the dependents'
-- follow-up and COMMIT. Each statement cost the server its Bind, Execute and executor start and
-- the worker its parameters' dumping and a result to read; the second round trip woke the
-- backend and the worker's thread once more. Called alone (store.settle_and_claim), this is one
-- statement in an implicit transaction: one message, one reply, one commit. Its steps:
--   1. what claim_free's first statement does (m007): generic plans and JIT off for the
--      transaction, synchronous_commit raised to `on` when the session's is weaker, the shared
--      pause locks of the queues (LIM-04), before any statement below takes its snapshot;
--   2. the settle (queries.sql: the fragment settle_body, the same statement as `settle`);
--   3. whether any of these jobs has dependents, in a statement of its own (a new snapshot under
--      READ COMMITTED, so it sees a dependent enqueued while the settle waited for its parent's
--      row, as with_dependents did); only then the dependents' follow-up of settle.send_whole:
--      their rows locked, the blocked ones whose parents are all done unblocked, those of
--      failed or cancelled parents cancelled on record, recursively;
--   4. the claim, as claim_free's (due jobs locked FOR UPDATE SKIP LOCKED, paused queues left
--      out, then the leases on exactly those jobs), after the follow-up so that it can take a
--      dependent just unblocked.
-- Its rows: first one for the settlements, every column NULL but o_applied (the ordinals, from
-- 1, of the settlements applied) and o_wake (the queues to wake after commit: a settled job due
-- again, a dependent unblocked); then the claimed jobs best first, their columns those of
-- sqlfiles.COLUMNS (the `{jcols}` of its RETURNING, which must match the o_ columns' types), the
-- lease's token and seconds, the claim's clock and the saved steps as JSON. Plain columns, not
-- the job's row as one composite value as claim_free returns it: the outer query's reading of
-- each field from that value cost the server more per job than the whole claim's select.
-- The settle's SQL is queries.sql's (settle_body, tally, the rules' texts), composed when this
-- migration runs: a later change to it changes a new schema's function but not an installed
-- one's, so it needs a new migration that replaces this function (CREATE OR REPLACE);
-- tests/unit/test_postgres_statements.py holds this file's composed text to make that seen.
-- `%` in the rules' literals: compose() doubles it for psycopg's parameters, and a migration
-- runs without parameters, so the doubled text is what the function holds; the cascade's
-- format string is undoubled at run time (replace), which is right either way.
--
-- Rolling upgrade: this only adds a function; workers of an older version keep their
-- statements. Applying it again replaces the function with itself.

CREATE OR REPLACE FUNCTION {schema}.settle_claim(
    p_ids text[], p_tokens text[], p_outcomes text[], p_results text[], p_errors text[],
    p_delays float8[], p_executions text[],
    p_queues text[], p_leases float8[], p_free text[], p_lim integer, p_holder text,
    p_now float8, p_schema text
) RETURNS TABLE (o_id text, o_task text, o_queue text, o_payload text, o_state text,
    o_priority integer, o_attempts integer, o_max_attempts integer, o_due float8,
    o_created_at float8, o_started_at float8, o_finished_at float8, o_error text, o_result text,
    o_key text, o_grp text, o_after_ids text[], o_cancel_requested boolean, o_seq bigint,
    o_token text, o_lease_seconds float8, o_clock float8, o_steps text,
    o_applied bigint[], o_wake text[])
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
    v_now float8;
    v_ids text[];
    v_unblocked text[];
BEGIN
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true),
        set_config('jit', 'off', true),
        CASE WHEN current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')
             THEN set_config('synchronous_commit', 'on', true) END,
        pg_advisory_xact_lock_shared(hashtextextended(p_schema || '/pause/' || q, 0))
    FROM unnest(p_queues) AS q ORDER BY q;
    v_now := COALESCE(p_now, extract(epoch FROM now())::float8);

    WITH t AS (SELECT v_now AS now),
    s AS (
        SELECT * FROM unnest(p_ids, p_tokens, p_outcomes, p_results, p_errors, p_delays,
            p_executions)
        WITH ORDINALITY AS s(job_id, token, outcome, result, error, delay, execution, ord)
    ),
    {settle_body}
    SELECT COALESCE(array_agg(upd.ord), ARRAY[]::bigint[]),
        COALESCE(array_agg(upd.queue) FILTER (WHERE upd.state = 'pending'), ARRAY[]::text[])
    INTO o_applied, o_wake
    FROM upd;

    IF EXISTS (SELECT 1 FROM {deps} d WHERE d.parent_id = ANY(p_ids)) THEN
        -- Lock the dependents first: two parents ending at once then see each other's commit.
        PERFORM j.id FROM {jobs} j
        WHERE j.state = 'blocked'
          AND j.id IN (SELECT d.job_id FROM {deps} d WHERE d.parent_id = ANY(p_ids))
        ORDER BY j.id
        FOR UPDATE;
        WITH t AS (SELECT v_now AS now),
        u AS (
            UPDATE {jobs} j SET state = 'pending', due = GREATEST(j.due, t.now)
            FROM t
            WHERE j.state = 'blocked'
              AND j.id IN (SELECT d.job_id FROM {deps} d WHERE d.parent_id = ANY(p_ids))
              AND NOT EXISTS (
                  SELECT 1 FROM {deps} d JOIN {jobs} p ON p.id = d.parent_id
                  WHERE d.job_id = j.id AND p.state <> 'done')
            RETURNING j.queue
        )
        SELECT array_agg(u.queue) INTO v_unblocked FROM u;
        o_wake := o_wake || COALESCE(v_unblocked, ARRAY[]::text[]);
        WITH RECURSIVE t AS (SELECT v_now AS now),
        roots AS (
            SELECT j.id, CASE j.state WHEN 'failed' THEN {reason_failed} ELSE {reason_cancelled} END
                AS reason
            FROM {jobs} j
            WHERE j.id = ANY(p_ids) AND j.state IN ('failed', 'cancelled')
              AND EXISTS (SELECT 1 FROM {deps} d WHERE d.parent_id = j.id)
        ),
        {cascade_pick},
        c AS (
            UPDATE {jobs} j SET state = 'cancelled',
                error = format(replace({dependency_cancelled}, '%%', '%'), pick.parent, pick.reason),
                finished_at = t.now, expires_at = t.now + j.keep
            FROM pick, t
            WHERE j.id = pick.id AND j.state = 'blocked'
            RETURNING j.id
        )
        SELECT array_agg(c.id) INTO v_ids FROM c;
    END IF;
    RETURN NEXT;  -- the settlements' row: every other column NULL

    IF p_lim <= 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(c.id ORDER BY c.priority DESC, c.due, c.seq) INTO v_ids FROM (
        SELECT x.id, x.priority, x.due, x.seq FROM unnest(p_free) AS q(name), LATERAL (
            SELECT j.id, j.priority, j.due, j.seq FROM {jobs} j
            WHERE j.state = 'pending' AND j.queue = q.name AND j.due <= v_now
            ORDER BY j.priority DESC, j.due, j.seq
            LIMIT p_lim
            FOR UPDATE SKIP LOCKED
        ) x
        WHERE NOT EXISTS (SELECT 1 FROM {paused} p WHERE p.queue = q.name)
        ORDER BY x.priority DESC, x.due, x.seq
        LIMIT p_lim
    ) c;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH upd AS (
        UPDATE {jobs} j SET state = 'running', attempts = j.attempts + 1, started_at = v_now,
            token = replace(gen_random_uuid()::text, '-', ''), lease_seconds = pol.lease,
            lease_expires = v_now + pol.lease, holder = p_holder
        FROM unnest(p_queues, p_leases) AS pol(queue, lease)
        WHERE j.id = ANY(v_ids) AND pol.queue = j.queue
        RETURNING {jcols}, j.token, j.lease_seconds
    )
    SELECT upd.*, v_now,
        (SELECT json_object_agg(s.name, s.value) FROM {steps} s WHERE s.job_id = upd.id)::text,
        NULL::bigint[], NULL::text[]
    FROM upd
    ORDER BY upd.priority DESC, upd.due, upd.seq;
END
$fn$;
