-- tinyjobs PostgreSQL schema, version 7: the claim of queues without limits as a function
-- (issue 14). At a low rate most claims find nothing: a worker woken by a NOTIFY that another
-- worker's claim answered first, and the claim that follows every settlement of a lone job.
-- The claim statement cost such an empty claim its whole plan's executor start (a CTE chain
-- with an UPDATE, its RETURNING and a sub-plan: ~100 us of server CPU) and the client a
-- pipeline of four statements (BEGIN, the pause locks, the claim, COMMIT). The function locks
-- the due jobs first and runs the UPDATE only when it locked some, so an empty claim is one
-- index probe; called alone it is one statement in an implicit transaction, one message and one
-- reply (store.claim). Its steps, in their order:
--   1. what the `pause_lock` statement did: the transaction's generic plans and JIT off
--      (queries.sql: generic_plans) and the shared pause locks of the queues (LIM-04). Each
--      statement of a VOLATILE function takes a new snapshot under READ COMMITTED, so the
--      statements below see any pause that committed while this waited for its lock;
--   2. synchronous_commit raised to `on` for the transaction when the session's is weaker
--      (raise_sync_commit: this claim may commit on its own, and leases are written durably);
--   3. the due jobs of the queues, best first, at most `lim`, locked FOR UPDATE SKIP LOCKED
--      (claim_start's `free`, paused queues left out);
--   4. none: return nothing. Else the leases taken on exactly those jobs (claim_end's UPDATE),
--      returned best first with their saved steps.
-- The rows come back as (claimed, clock, step_values): the job's row after the claim (its
-- columns read as (c.claimed).<name>, so the function's type does not follow
-- sqlfiles.COLUMNS), the claim's clock and the steps as JSON text.
--
-- Rolling upgrade: this only adds a function. Workers of an older version claim with their own
-- statement, as before; workers of this version need the function, which `open` creates (every
-- process migrates on open). A later change to the claim of unlimited queues is a new
-- migration (CREATE OR REPLACE FUNCTION), as the function lives in the schema, not in the code;
-- this one replaces too, so applying it again is harmless.

CREATE OR REPLACE FUNCTION {schema}.claim_free(
    p_queues text[], p_leases float8[], p_free text[], p_lim integer, p_holder text,
    p_now float8, p_schema text
) RETURNS TABLE (claimed {jobs}, clock float8, step_values text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_now float8;
    v_ids text[];
BEGIN
    -- Steps 1 and 2 in one statement (the settings are set once per queue: harmless).
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true),
        set_config('jit', 'off', true),
        CASE WHEN current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')
             THEN set_config('synchronous_commit', 'on', true) END,
        pg_advisory_xact_lock_shared(hashtextextended(p_schema || '/pause/' || q, 0))
    FROM unnest(p_queues) AS q ORDER BY q;
    v_now := COALESCE(p_now, extract(epoch FROM now())::float8);
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
        RETURNING j AS jr, j.id, j.priority, j.due, j.seq
    )
    SELECT upd.jr, v_now,
        (SELECT json_object_agg(s.name, s.value) FROM {steps} s WHERE s.job_id = upd.id)::text
    FROM upd
    ORDER BY upd.priority DESC, upd.due, upd.seq;
END
$fn$;
