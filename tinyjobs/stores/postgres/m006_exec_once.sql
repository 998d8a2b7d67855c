-- tinyjobs PostgreSQL schema, version 6: an attempt's execution row is written once, when the
-- attempt ends (issue 14), instead of inserted at the claim and updated at the settlement: one
-- row version and 3 index entries fewer per job (the insert's pkey, executions_job and
-- executions_starts entries; the update's four, executions_ended's among them, become one
-- insert's four). While an attempt runs, the job's row describes it: holder (host and pid),
-- started_at, attempts. The running attempt is read from there by `executions` (get) and by
-- the rate limits (`starts`); settle and end_leases insert the ended execution, and keep
-- `holder` on the job's row so that they can (it is read only with state = 'running').
--
-- Attempts running at upgrade time: their open execution rows are deleted here, as the job's
-- row says the same (the claim wrote host, pid, queue, group, attempt and started_at from the
-- same holder and row), so that the attempt is recorded once, at its end, like any other.
-- An open row that is not the running attempt of its job (none should exist) is left as it is.
--
-- A worker of an older version still running after this (a rolling upgrade) still writes an
-- open row at its claims, and ends it at its own settlements. For the rest, cheaply and only
-- off the worker's path: end_leases (reaper, dead workers) of this version ends such an open
-- row instead of inserting one, and `executions` shows it instead of the job's row; a rate
-- limit counts such a running attempt twice (fewer starts let through, never more). What is not
-- handled: an older version's reaper or end_leases ending an attempt claimed by this version
-- records no execution for it (it finds no open row to end). Stop the older workers' reapers,
-- or accept that gap, for the length of the upgrade.

-- No table lock: an older worker's settlement that ends such a row meanwhile makes this
-- DELETE read the row again (READ COMMITTED), find it ended and leave it; its claims that
-- commit after this started are the rolling upgrade's open rows above.
DELETE FROM {executions} e
USING {jobs} j
WHERE e.job_id = j.id AND e.ended_at IS NULL AND j.state = 'running'
  AND e.attempt = j.attempts AND e.started_at = j.started_at;
