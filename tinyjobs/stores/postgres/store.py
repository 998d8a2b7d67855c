"""The PostgreSQL store (psycopg 3): many processes on many hosts share one schema.

Every method is one transaction on this thread's connection (see connection.py); writes run
with synchronous_commit at least `on` (SET LOCAL when the session's level is weaker, so that
PgBouncer's transaction pooling keeps it). `now=None` is the server's clock (CLK-01)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors

from ...errors import NotSupported, StoreError
from ...holder import Holder
from ...job import OUTCOME_LEASE_EXPIRED, OUTCOME_WORKER_LOST, Job
from ..base import Claimed, LeaseStatus, NewJob, QueuePolicy, Settlement
from . import bulk, claims, cycle, settle, steps
from .config import Settings
from .connection import Connections
from .enqueue import caller_steps, enqueue_one, existing, one_job, wake
from .enqueue import enqueue as enqueue_tx
from .listen import Listener
from .rows import tail, to_job
from .sqlfiles import queries
from .steps import GOT, drive
from .views import PostgresViews

T = TypeVar("T")
DUE_FRESH = 0.25  # wait() reads the earliest scheduled due time again after this long
# The columns `get` returns after COLUMNS (GOT, read in steps.py), and those of `jobs`.
LISTED = tail("now")
__all__ = ["GOT", "LISTED", "PostgresStore"]


class PostgresStore(PostgresViews):
    """Jobs in a PostgreSQL schema. capabilities: transactions, notify, shared, timed."""

    capabilities = frozenset({"transactions", "notify", "shared", "timed"})

    def __init__(self, settings: Settings, retry_for: float = 10.0, listen: bool = True) -> None:
        self.settings = settings
        self.url = settings.masked
        self.schema = settings.schema
        self.q = queries(settings.schema)
        self._channel = settings.channel
        self._conns = Connections(settings, retry_for=retry_for)
        self._raise_sync = self.q["raise_sync_commit"]
        self.listen = listen  # False: wake-ups by polling (PgBouncer transaction pooling)
        self._listener = Listener(self._conns, self._channel, enabled=listen)
        self._due_seen: dict[tuple[str, ...], tuple[float, float | None]] = {}  # for wait
        # Whether settle_and_claim's last claim found fewer jobs than it asked for (see there).
        self._dry = True
        if not listen:  # polling wakes every POLL whatever is due: workers claim by the clock
            self.capabilities = self.capabilities - {"timed"}

    def _run(self, op: Any, write: bool = True, idempotent: bool = True) -> Any:
        return self._conns.run(op, write=write, idempotent=idempotent, raise_sync=self._raise_sync)

    def _one(self, name: str, params: dict, write: bool = False) -> Any:
        """One statement's rows, as its own transaction."""

        def op(cur: psycopg.Cursor, retrying: bool) -> list:
            cur.execute(self.q[name], params)
            return cur.fetchall() if cur.description else []

        return self._run(op, write=write)

    def now(self) -> float:
        """The server's clock, in epoch seconds."""
        return self._one("clock", {})[0][0]

    def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        """Add the batch in one transaction (ours, or the caller's with `conn`: JOB-02)."""
        if not jobs:
            return []
        if conn is not None:
            return self._enqueue_on(conn, jobs, now)
        if len(jobs) == 1 and not jobs[0].after:
            return [self._enqueue_one(jobs[0], now)]

        def op(cur: psycopg.Cursor, retrying: bool) -> list[Job]:
            return enqueue_tx(cur, self.q, jobs, now, None)

        added = self._copy(jobs, now) if bulk.copyable(jobs) else None
        if added is None:
            added = _past_key_races(lambda: self._run(op))
        self._notify({job.queue for job in added if job.created})
        return added

    def _copy(self, jobs: Sequence[NewJob], now: float | None) -> list[Job] | None:
        """The batch written through COPY (bulk.py), or None when an id of it is taken (the
        transaction rolled back: the general path then finds or replaces that job). Safe to
        send again after an unanswered COMMIT: a batch that did commit then meets its own ids
        and goes the general way, which reports each job as found."""

        def op(cur: psycopg.Cursor, retrying: bool) -> list[Job]:
            return bulk.copy_in(cur, self.q, jobs, now)

        try:
            return self._run(op)
        except pgerrors.UniqueViolation:
            return None

    def _enqueue_one(self, job: NewJob, now: float | None) -> Job:
        """One job without parents: its transaction and the wake-up of its queue's waiters in
        one write and one round trip (enqueue.enqueue_one)."""

        def send(conn: psycopg.Connection, weak: bool) -> float | None:
            return enqueue_one(conn, self.schema, self._channel, job, now, weak)

        def holder_of(job: NewJob) -> dict:
            return self._run(lambda cur, retrying: existing(cur, self.q, [job], now), write=False)

        def replace(job: NewJob) -> Job:
            [added] = _past_key_races(
                lambda: self._run(lambda cur, retrying: enqueue_tx(cur, self.q, [job], now, None))
            )
            if added.created:  # the wake-up above went before it existed
                self._notify({job.queue})
            return added

        written_at = _past_key_races(lambda: self._conns.exchange(send, idempotent=True))
        return one_job(job, written_at, holder_of, replace)

    def _notify(self, queues: set[str]) -> None:
        """Wake the waiters of these queues, after the change committed (its own statement:
        see enqueue.py on why not inside the writing transaction). Best effort: a waiter that
        misses it still wakes at its timeout. One statement in an implicit transaction of its
        own (one round trip, where BEGIN, the wake-up and COMMIT took three)."""
        if not queues:
            return
        sql, params = wake(self.q, self._channel, queues)
        try:
            self._conns.alone(sql, params)
        except (psycopg.Error, StoreError):
            pass

    def _enqueue_on(self, conn: Any, jobs: Sequence[NewJob], now: float | None) -> list[Job]:
        """Write through the caller's psycopg connection, inside its open transaction: the jobs
        exist exactly when the caller commits. Its synchronous_commit is raised for that
        transaction alone when weaker than `on`."""
        if not isinstance(conn, psycopg.Connection):
            raise NotSupported(
                "conn= takes a sync psycopg 3 Connection (from Django: connection.connection; "
                "from SQLAlchemy: session.connection().connection.driver_connection), not "
                f"{type(conn).__name__}; a psycopg.AsyncConnection goes to aenqueue(conn=...)"
            )
        if conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            with conn.transaction(), conn.cursor() as cur:
                return self._enqueue_cur(cur, jobs, now)
        with conn.cursor() as cur:
            return self._enqueue_cur(cur, jobs, now)

    def _enqueue_cur(self, cur: Any, jobs: Sequence[NewJob], now: float | None) -> list[Job]:
        return drive(cur, caller_steps(self.q, jobs, now, self._channel))

    def claim(
        self,
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> list[Claimed]:
        """Take up to `limit` leases in one transaction (see claims.py). Without limits, the
        one statement `claim_free` (m007's function) as its own implicit transaction: one
        message, one reply, and next to no work on the server when nothing is due (at a low
        rate every NOTIFY wakes every idle worker, and all but one find nothing). With limits,
        in pipeline mode: BEGIN, the pause locks, the counts of the limited queues (read on the
        way), the claim and COMMIT, the claimed rows read after the COMMIT. Not retried once
        sent: the leases it may have taken end by the reaper."""
        if not claims.wanted(queues, limit):
            return []
        if claims.free_only(queues):
            sent = claims.params(self.schema, queues, holder, limit, now)
            return claims.read(self._conns.alone(self.q["claim_free"], sent))

        def send(conn: psycopg.Connection, retrying: bool) -> Callable[[], list[Claimed]]:
            return claims.start(conn.cursor(), self.q, self.schema, queues, holder, limit, now)

        return self._conns.pipeline(send, idempotent=False, raise_sync=self._raise_sync)

    def renew(self, tokens: Sequence[str], now: float | None = None) -> dict[str, LeaseStatus]:
        """Extend live leases in one statement; "lost" for tokens no longer on a running job."""
        if not tokens:
            return {}
        rows = self._one("renew", {"now": now, "tokens": list(tokens)}, write=True)
        live = {token: ("cancel" if cancel else "ok") for token, cancel in rows}
        return {token: live.get(token, "lost") for token in tokens}  # type: ignore[misc]

    def save_step(self, token: str, name: str, value: str, now: float | None = None) -> bool:
        """Keep a step's value while the lease of `token` is live; one statement."""
        params = {"token": token, "name": name, "value": value}
        return bool(self._one("save_step", params, write=True))

    def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        """One transaction: the settlements, then the claim (one commit for both). Not retried
        once sent, as a claim never is; the worker then settles again, which the lease token
        makes harmless, and leases it may have taken end by the reaper.

        For queues without limits (the usual worker): m008's function `settle_claim`, sent
        alone, one statement in an implicit transaction and one round trip; the function does
        the dependents' follow-up only when a settled job has dependents. With limits, in
        pipeline mode: in one round trip when the last claim found fewer jobs than it asked
        for (`_dry`: a low rate, where each round trip wakes a sleeping backend and the
        worker's thread), BEGIN, the settle, the dependents' statements for every settled job
        (settle.send_whole), the claim and COMMIT leaving together; else (a drain, where those
        statements cost the server more than the round trip they save) in two: BEGIN, the
        settle, with_dependents and the claim, then what the settle's rows call for and
        COMMIT."""
        if settlements and claims.wanted(queues, limit) and claims.free_only(queues):
            sent = claims.params(self.schema, queues, holder, limit, now)
            sent.update(settle.arrays(settlements))
            text = self.q["settle_claim"]
            rows = self._conns.exchange(
                lambda conn, weak: cycle.run(conn, self.schema, text, sent), idempotent=False
            )
            applied, due_again, claimed = settle.read_cycle(rows, len(settlements))
            self._dry = len(claimed) < limit
            self._notify(due_again)
            return applied, claimed

        def send(conn: psycopg.Connection, retrying: bool) -> Any:
            settling, claiming = conn.cursor(), conn.cursor()
            # Its claim is expected to find nothing when the last one found fewer jobs than it
            # asked for: then m007's function, which costs next to nothing in that case and
            # takes its pause locks itself (a lone job's settlement at a low rate); else the
            # claim statement, which costs less when it claims (a drain).
            dry = self._dry
            # First, the generic plans' setting, with the claim's pause locks when it claims by
            # statement (taken early: held a few statements longer, one statement fewer).
            locking = claims.wanted(queues, limit) and not (dry and claims.free_only(queues))
            if locking:
                claims.lock(claiming, self.q, self.schema, queues)
            else:
                claiming.execute(self.q["generic_plans"])
            whole = dry and bool(settlements)
            settled = settle.send_whole(conn, self.q, settlements, now, retrying) if whole else None
            dependents = (
                settle.send(settling, self.q, settlements, now) if settlements and not whole else None
            )
            read_claims = claims.start(
                claiming, self.q, self.schema, queues, holder, limit, now, locked=locking, dry=dry
            )
            if dependents is not None:  # read the settle now, then its follow-up and COMMIT
                done = settle.finish(settling, self.q, settlements, now, retrying, dependents)
                settled = lambda: done  # noqa: E731

            def read() -> tuple[list[bool], set[str], list[Claimed]]:
                applied, due_again = settled() if settled is not None else ([], set())
                claimed = read_claims()
                self._dry = len(claimed) < limit
                return applied, due_again, claimed

            return read

        applied, due_again, claimed = self._conns.pipeline(
            send, idempotent=False, raise_sync=self._raise_sync
        )
        self._notify(due_again)
        return applied, claimed

    def settle(self, settlements: Sequence[Settlement], now: float | None = None) -> list[bool]:
        """Apply settlements in one transaction (group commit), idempotent by lease token."""

        def op(cur: psycopg.Cursor, retrying: bool) -> tuple[list[bool], set[str]]:
            dependents = settle.send(cur, self.q, settlements, now)
            return settle.finish(cur, self.q, settlements, now, retrying, dependents)

        if not settlements:
            return []
        applied, due_again = self._run(op)
        self._notify(due_again)
        return applied

    def reap(self, now: float | None = None, limit: int = 1000) -> int:
        """Return expired leases' jobs to waiting (or failed, or cancelled); one transaction."""

        def op(cur: psycopg.Cursor, retrying: bool) -> tuple[int, set[str]]:
            params = {"limit": limit, "outcome": OUTCOME_LEASE_EXPIRED}
            return settle.end_leases(cur, self.q, "end_expired", params, now)

        count, due_again = self._run(op)
        self._notify(due_again)
        return count

    def holders(self, host: str) -> list[Holder]:
        return [Holder.parse(row[0]) for row in self._one("holders", {"host": host})]

    def end_leases(self, holders: Sequence[Holder], now: float | None = None) -> int:
        """End every lease of these holders at once, in one transaction (DUR-02)."""
        if not holders:
            return 0

        def op(cur: psycopg.Cursor, retrying: bool) -> tuple[int, set[str]]:
            params = {"holders": [h.id for h in holders], "outcome": OUTCOME_WORKER_LOST}
            return settle.end_leases(cur, self.q, "end_holders", params, now)

        count, due_again = self._run(op)
        self._notify(due_again)
        return count

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        """Cancel in one transaction: a job not yet running is removed (its dependents are
        cancelled on record); a running one is marked (JOB-08)."""

        def op(cur: psycopg.Cursor, retrying: bool) -> bool:
            return drive(cur, steps.cancel(self.q, job_id, now, self._channel))

        return self._run(op, idempotent=False)

    def retry(self, job_id: str, now: float | None = None) -> bool:
        """Make a failed or cancelled job due now with a fresh budget; one statement."""
        params = {"now": now, "id": job_id, "channel": self._channel}
        try:
            return bool(self._one("retry", params, write=True))
        except pgerrors.UniqueViolation:  # its key is held by a live job meanwhile
            return False

    def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        """The job's snapshot (with `ahead` and, when asked, executions): one transaction,
        its statements sent together in pipeline mode, one round trip (where it was one per
        statement, BEGIN and COMMIT included). The executions are read whether or not the job
        exists (none then): waiting for the job's row first would cost the round trip."""

        def send(conn: psycopg.Connection, retrying: bool) -> Callable[[], Job | None]:
            job = conn.cursor()
            job.execute(self.q["get"], {"now": now, "id": job_id})
            ran = conn.cursor() if executions else None
            if ran is not None:
                ran.execute(self.q["executions"], {"id": job_id})
            return lambda: steps.snapshot(job.fetchall(), None if ran is None else ran.fetchall())

        return self._conns.pipeline(send, idempotent=True, raise_sync=self._raise_sync)

    def jobs(
        self,
        state: str | None = None,
        queue: str | None = None,
        limit: int = 100,
        now: float | None = None,
        newest: bool = False,
        offset: int = 0,
    ) -> list[Job]:
        params = {"now": now, "state": state, "queue": queue, "limit": limit}
        params.update(direction=-1 if newest else 1, offset=int(offset))
        return [to_job(row, row[LISTED["now"]]) for row in self._one("jobs", params)]

    def counts(self, now: float | None = None) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for queue, state, n in self._one("counts", {"now": now}):
            out.setdefault(queue, {})[state] = n
        return out

    def purge(self, now: float | None = None, limit: int = 1000) -> int:
        """Remove final jobs past their window, with their steps and executions (JOB-10), which
        leave the counters in the same statement; then the per-minute counter rows that add up
        to nothing are swept (queries.sql: sweep_minutes)."""

        def op(cur: psycopg.Cursor, retrying: bool) -> int:
            cur.execute(self.q["purge"], {"now": now, "limit": limit})
            ids = [row[0] for row in cur.fetchall()]
            if ids:
                cur.execute(self.q["forget"], {"ids": ids})
                keys = cur.fetchall()
                if keys:
                    minutes, outcomes = [k[0] for k in keys], [k[1] for k in keys]
                    cur.execute(self.q["sweep_minutes"], {"minutes": minutes, "outcomes": outcomes})
            return len(ids)

        return self._run(op)

    def fire_cron(self, schedule: str, due: float, job: NewJob, now: float | None = None) -> bool:
        """Record `due` and enqueue `job` in one transaction, once per due time (CRON-01)."""

        def op(cur: psycopg.Cursor, retrying: bool) -> bool:
            cur.execute(self.q["fire_cron"], {"schedule": schedule, "due": float(due)})
            if cur.fetchone() is None:
                return False
            enqueue_tx(cur, self.q, [job], now, self._channel)  # rare: notify at commit
            return True

        return self._run(op, idempotent=False)

    def cron_last(self, schedule: str) -> float | None:
        rows = self._one("cron_last", {"schedule": schedule})
        return rows[0][0] if rows else None

    def lead(self, name: str, holder: str, ttl: float, now: float | None = None) -> bool:
        params = {"now": now, "name": name, "holder": holder, "ttl": float(ttl)}
        return bool(self._one("lead", params, write=True))

    def resign(self, name: str, holder: str) -> None:
        self._one("resign", {"name": name, "holder": holder}, write=True)

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """LISTEN for the queues' notifications, and return by the time the earliest scheduled
        job of the queues falls due ("timed": a worker then need not claim by the clock)."""

        key = tuple(queues)

        def until_due(conn: psycopg.Connection) -> tuple[float | None, float | None]:
            # At 50 jobs a second a notification ends every wait: one query per wait would
            # double the watcher's cost. A due time read less than DUE_FRESH ago is used again
            # (it may miss a job scheduled since, whose notification ended an earlier wait),
            # and read anew once DUE_FRESH is over: such a job starts at most that late, the
            # bound of the worker's IDLE_POLL claims.
            clock = time.monotonic()
            read_at, due_at = self._due_seen.get(key, (float("-inf"), None))
            if clock - read_at >= DUE_FRESH:
                row = conn.execute(self.q["until_due"], {"now": None, "queues": list(queues)}).fetchone()
                seconds = None if row is None or row[0] is None else float(row[0])
                self._due_seen[key] = (clock, None if seconds is None else clock + seconds)
                return seconds, None  # fresh: later news comes by notification
            if due_at is not None and due_at <= clock:
                # Passed: a wait returned for it already (or for news before it), and the claim
                # that followed took it. Reported again, it would end every wait at once until
                # DUE_FRESH is over: a watcher spinning hundreds of times a second, each turn a
                # claim (a job read just before its due time made this happen at 50 jobs/s).
                self._due_seen[key] = (read_at, None)
                due_at = None
            return (None if due_at is None else due_at - clock), read_at + DUE_FRESH - clock

        return self._listener.wait(queues, timeout, until_due if queues else None)

    def aio(self) -> Any:
        """The async twin of this store's front door (enqueue, get, cancel, retry): aio.py."""
        from .aio import AsyncPostgresStore

        return AsyncPostgresStore(self.settings, self.q, retry_for=self._conns.retry_for)

    def close(self) -> None:
        self._listener.close()
        self._conns.close()


def _past_key_races(write: Callable[[], T]) -> T:
    """`write()`, tried again when a concurrent enqueue took the same key between our check
    and our insert (the unique index refuses it): the next try finds that job and returns it.
    After six tries the error stands."""
    for _ in range(5):
        try:
            return write()
        except pgerrors.UniqueViolation:
            continue
    return write()
