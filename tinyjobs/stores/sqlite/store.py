"""The SQLite store: one file, WAL, every write one BEGIN IMMEDIATE transaction."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tinyjobs.errors import ConfigError, StoreUnavailable
from tinyjobs.holder import Holder
from tinyjobs.job import CANCELLED, OUTCOME_LEASE_EXPIRED, OUTCOME_WORKER_LOST, RUNNING, STATES, Job
from tinyjobs.stores.base import Claimed, LeaseStatus, NewJob, QueuePolicy, Settlement
from tinyjobs.stores.rules import PENDING, STORED_FINAL
from tinyjobs.urls import mask

from .channels import SCHEDULED, Channels
from .claim import Taken, claim_jobs, claimed, one_statement
from .connection import Target, begin_immediate, immediate, is_busy, snapshot
from .doorbell import UNLOCK_SUFFIX, Doorbell
from .enqueue import due_of, enqueue_batch
from .filesystem import why_unwritable
from .lifecycle import cancel_dependents, delete_jobs, end_lease, settle_done_batch, settle_one
from .pool import Pool
from .rows import Q, as_json, running_execution, to_execution, to_job
from .views import SQLiteViews

# With the wake-up channels (channels.py), a waiter sleeps in the kernel until a token comes,
# and looks at PRAGMA data_version once a SAFETY_TICK as well: for commits that wake no channel
# (an enqueue in the caller's own transaction, conn=; a process of an older version).
SAFETY_TICK = 1.0
# Without them (no epoll, no FIFOs): PRAGMA data_version costs microseconds, but waking a thread a
# thousand times a second does not: poll every millisecond while jobs come and go, every 10 ms
# once the store was quiet a second.
WAIT_POLL_BUSY = 0.001
WAIT_POLL_QUIET = 0.010
QUIET_AFTER = 1.0
DUE_MARGIN = 0.001  # wait returns this long after a scheduled job's due time (see _read_due)
_BEGIN = {
    "": "BEGIN",
    "DEFERRED": "BEGIN DEFERRED",
    "IMMEDIATE": "BEGIN IMMEDIATE",
    "EXCLUSIVE": "BEGIN EXCLUSIVE",
}


class SQLiteStore(SQLiteViews):
    """Jobs in one SQLite file, shared by every process of this host that opens it.

    Each method is one transaction: writes take `BEGIN IMMEDIATE`, so they are serialised
    with every other process's writes and never fail half-way. Connections are per thread,
    and never reused across fork."""

    # "timed": `wait` also returns by the time the earliest scheduled job of its queues falls
    # due, so a worker whose queues have no limits claims by the clock once a TIMED_POLL (worker.py)
    # instead of every IDLE_POLL (0.25 s): an idle worker's claims fall from four a second.
    capabilities = frozenset({"transactions", "shared", "timed", "wakes_one"})

    def __init__(self, target: Target, wake: str | None = None) -> None:
        """`wake="poll"` (or TINYJOBS_SQLITE_WAKE=poll) makes `wait` poll even where the
        wake-up channels work; tests use it to check that fallback."""
        self.url = target.url
        self.path = target.path
        self.synchronous = target.synchronous
        self._pool = Pool(target)
        # A token per queue after each commit that can make its jobs claimable: one waiting
        # thread of the queue wakes (channels.py), not every waiter on the host.
        self._channels = Channels(target.path, wake)
        # Rung after every write's COMMIT: a writer waiting for the lock (begin_immediate)
        # wakes at once instead of at the end of its back-off sleep.
        self._unlock = Doorbell(target.path, wake, suffix=UNLOCK_SUFFIX)
        self._seen: dict[int, int] = {}  # wait connection -> data_version last seen
        self._waits = threading.local()  # each waiting thread's state (_wait_state)
        self._changed: dict[int, float] = {}  # wait connection -> when it last saw a change

    # -- plumbing -------------------------------------------------------------------------

    def now(self) -> float:
        """The process clock: SQLite has no server to ask."""
        return time.time()

    def _now(self, now: float | None) -> float:
        return time.time() if now is None else now

    def _write(self) -> _Write:
        """One write transaction on this thread's connection. The writes that can make jobs
        claimable wake their queues' channels after it commits (`_wake`): enqueue, resume,
        retry, and a settlement, reap or lost holder when it did. Heartbeats, claims (unless
        they leave jobs behind), renewals and the leader's lease wake nobody: an idle fleet's
        writes wake no worker."""
        return _Write(self)

    def _unavailable(self, err: sqlite3.Error) -> StoreUnavailable:
        return StoreUnavailable(f"sqlite store {mask(self.url)!r}: {_explained(err, self.path)}")

    def _wake(self, queues: Iterable[str], scheduled: Iterable[str] = ()) -> None:
        """After a commit: one waiting thread of each queue of `queues` wakes (channels.py),
        and one waiting thread of each queue of `scheduled` (where a job is pending with a
        later due time) reads the earliest scheduled due time again (see wait)."""
        if queues:
            self._channels.wake(queues)
        if scheduled:
            self._channels.wake(scheduled, SCHEDULED)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot across its statements)."""
        try:
            with snapshot(self._pool.get()) as conn:
                yield conn
        except sqlite3.OperationalError as err:
            raise StoreUnavailable(f"sqlite store {mask(self.url)!r}: {_explained(err, self.path)}") from None

    # -- adding ---------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        """Add jobs in one transaction (see Store.enqueue). With `conn`, the rows are written
        on the caller's connection, inside its open transaction, and exist when it commits."""
        at = self._now(now)
        if conn is not None:
            # The rows exist once the caller commits, which we do not see: no wake-up (it would
            # come too early); waiters find them at their SAFETY_TICK, workers at their claim.
            return self._enqueue_on(conn, jobs, at)
        with self._write() as db:
            added = enqueue_batch(db.cursor(), jobs, at)
        self._wake(*_woken_by(jobs, at))
        return added

    def _enqueue_on(self, conn: Any, jobs: Sequence[NewJob], now: float) -> list[Job]:
        """JOB-02: no BEGIN/COMMIT of ours when the caller has a transaction open; a
        savepoint makes the batch all-or-nothing inside it."""
        if not isinstance(conn, sqlite3.Connection):
            raise ConfigError(
                f"conn= must be a sqlite3.Connection to {self.path!r}, not {type(conn).__name__}"
            )
        self._check_same_file(conn)
        cur = conn.cursor()
        cur.row_factory = sqlite3.Row
        if not conn.in_transaction:
            if conn.isolation_level is None:
                # Autocommit and no transaction open: there is nothing to join, so the
                # batch commits on its own, as one transaction.
                with immediate(conn, self.url):
                    added = enqueue_batch(cur, jobs, now)
                self._wake(*_woken_by(jobs, now))
                return added
            # Python's own transaction control would BEGIN at our first insert: do it now,
            # so that the reads that check ids and keys are inside it as well.
            cur.execute(_BEGIN.get(conn.isolation_level.upper(), "BEGIN"))
        cur.execute("SAVEPOINT tinyjobs_enqueue")
        try:
            jobs_out = enqueue_batch(cur, jobs, now)
        except BaseException:
            cur.execute("ROLLBACK TO tinyjobs_enqueue")
            cur.execute("RELEASE tinyjobs_enqueue")
            raise
        cur.execute("RELEASE tinyjobs_enqueue")
        return jobs_out

    def _check_same_file(self, conn: sqlite3.Connection) -> None:
        files = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
        mine = os.path.realpath(self.path)
        if not files or not files[0] or os.path.realpath(files[0]) != mine:
            raise ConfigError(
                f"conn= is a connection to {files[0] if files else None!r}, not to the store's "
                f"file {mine!r}; jobs can only commit with transactions on that file"
            )

    def fire_cron(self, schedule: str, due: float, job: NewJob, now: float | None = None) -> bool:
        """One transaction: record `due` for `schedule` if later than the last, and enqueue."""
        with self._write() as db:
            at = self._now(now)
            if db.execute(Q["fire_cron"], (schedule, due)).rowcount != 1:
                return False
            enqueue_batch(db.cursor(), [job], at)
        self._wake(*_woken_by([job], at))
        return True

    def cron_last(self, schedule: str) -> float | None:
        """One read."""
        with self._read() as db:
            row = db.execute(Q["cron_last"], (schedule,)).fetchone()
        return None if row is None else row[0]

    # -- running --------------------------------------------------------------------------

    def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        """One transaction: the settlements, then the claim (one fsync for both). Wakes the
        queues where the settlements may have made jobs claimable (see _settled)."""
        with self._write() as db:
            at = self._now(now)
            flags, woken, scheduled = self._settled(db, settlements, at, queues)
            # No pass_on here (a full worker takes what it left on its next cycle): no need to
            # know whether jobs were left behind.
            taken = claim_jobs(db, queues, holder, limit, at, left=False) if limit > 0 and queues else None
        self._wake(woken, scheduled)
        if taken and len(taken[0]) == limit:
            # This worker is full: the next tokens of its queues go to idle workers first. No
            # token is passed on for the jobs it left behind: it takes them itself on its next
            # cycle, and another worker with room has been woken by their own tokens.
            self._channels.step_back(queues)
        return flags, claimed(taken) if taken else []

    @staticmethod
    def _settled(
        db: sqlite3.Connection,
        settlements: Sequence[Settlement],
        at: float,
        queues: Mapping[str, QueuePolicy] | None,
    ) -> tuple[list[bool], set[str], set[str]]:
        """Apply the settlements; also the queues to wake: those of released dependents, the
        queue of each settlement that went the slow way (a retry, snooze or hand-back is
        pending again; a failure frees room), and that of a lease that ended on a queue with
        a concurrency limit (a waiting job of it may fit now). `queues` None (unknown): every
        queue where a lease ended. A plain done on a queue without limits wakes nobody: the
        worker that settles it claims in the same transaction. Last, the queues where a job
        may now be pending with a later due time (a delayed retry or snooze, released
        dependents): their waiters read the earliest due time again (wait)."""
        applied, done_in, woken = settle_done_batch(db, settlements, at)
        scheduled = set(woken)  # released dependents keep their own due time
        flags = []
        for s in settlements:
            if (s.job_id, s.token) in applied:
                flags.append(True)
            else:
                flags.append(settle_one(db, s, at, woken, scheduled))
        woken.update(q for q in done_in if queues is None or _limited(queues.get(q)))
        return flags, woken, scheduled

    def claim(
        self,
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> list[Claimed]:
        """One transaction: limits counted and leases taken together (LIM-01)."""
        if limit <= 0 or not queues:
            return []
        taken = self._claim_in_one_statement(queues, holder, limit, now) if one_statement(queues) else None
        if taken is None:
            taken = self._claim_reading_first(queues, holder, limit, now)
        if taken is None:
            with self._write() as db:
                taken = claim_jobs(db, queues, holder, limit, self._now(now))
        if len(taken[0]) == limit:
            self._channels.step_back(queues)  # full: the next tokens go to idle workers first
            if taken[2]:
                # Due jobs left behind (a burst, a resumed queue, scheduled jobs now due): the
                # next idle worker's turn.
                self._channels.pass_on(taken[2])
        return claimed(taken)

    def _claim_in_one_statement(
        self, queues: Mapping[str, QueuePolicy], holder: Holder, limit: int, now: float | None
    ) -> Taken | None:
        """The claim of one queue without limits as one autocommit statement (claim.claim_due):
        no BEGIN and no COMMIT to run, nor a statement to find the candidates first; its rows
        come back once its commit (synced) is done. None, with nothing written, when the write
        lock is held (SQLITE_BUSY at the statement's start: the connection does not wait
        outside reads): the claim then reads first, which does not wait for the lock when it
        finds nothing (_claim_reading_first). A claim that finds nothing takes the write lock
        for the statement's length and writes nothing (no frame, no sync)."""
        db = self._pool.get()
        try:
            taken = claim_jobs(db, queues, holder, limit, self._now(now))
        except sqlite3.OperationalError as err:
            if is_busy(err):
                return None
            raise self._unavailable(err) from None
        if taken[0]:  # it wrote: as after every write (see _write)
            self._unlock.ring()
            self._pool.written_to_current_file()
        return taken

    def _claim_reading_first(
        self, queues: Mapping[str, QueuePolicy], holder: Holder, limit: int, now: float | None
    ) -> Taken | None:
        """The claim as a deferred transaction: it looks for due jobs as a reader and takes the
        write lock only at its first write (the lease). A claim that finds nothing (a worker's
        clock claim, a wake-up another worker answered: four a second for each idle worker)
        then ends as a read, without the write lock, the unlock bell or the file check after a
        write. None, with nothing written, when this way cannot be taken: a queue counts starts
        by the clock (a rate limit: its starts must be counted by a time read under the write
        lock, see claim), or the lock is held or another writer committed since this read began
        (SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT at the first write): the caller then claims with
        BEGIN IMMEDIATE, waiting for the lock as every write does. Once the lease is written
        the lock is this transaction's, so what it read was still the latest."""
        if any(p.rate is not None or p.group_rate is not None for p in queues.values()):
            return None
        db = self._pool.get()
        try:
            db.execute("BEGIN")
            try:
                # Candidates first (at_once=False): claim_due would take the lock at its start.
                taken = claim_jobs(db, queues, holder, limit, self._now(now), at_once=False)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as err:
            if is_busy(err):
                return None
            raise StoreUnavailable(f"sqlite store {mask(self.url)!r}: {_explained(err, self.path)}") from None
        if taken[0]:  # it wrote: as after every write (see _write)
            self._unlock.ring()
            self._pool.written_to_current_file()
        return taken

    def renew(self, tokens: Sequence[str], now: float | None = None) -> dict[str, LeaseStatus]:
        """One statement for all tokens."""
        if not tokens:
            return {}
        with self._write() as db:
            at = self._now(now)
            rows = db.execute(Q["renew"], {"now": at, "tokens": as_json(tokens)}).fetchall()
        live: dict[str, LeaseStatus] = {row[0]: "cancel" if row[1] else "ok" for row in rows}
        return {token: live.get(token, "lost") for token in tokens}

    def save_step(self, token: str, name: str, value: str, now: float | None = None) -> bool:
        """One statement: written only while `token` holds the job."""
        with self._write() as db:
            params = {"token": token, "name": name, "value": value}
            return db.execute(Q["save_step"], params).rowcount == 1

    def settle(self, settlements: Sequence[Settlement], now: float | None = None) -> list[bool]:
        """All settlements in one transaction: one fsync for the whole batch."""
        if not settlements:
            return []
        with self._write() as db:
            flags, woken, scheduled = self._settled(db, settlements, self._now(now), None)
        self._wake(woken, scheduled)
        return flags

    def reap(self, now: float | None = None, limit: int = 1000) -> int:
        """One transaction: expired leases end as "lease expired"."""
        with self._write() as db:
            at = self._now(now)
            rows = db.execute(Q["reap"], (at, limit)).fetchall()
            for row in rows:
                end_lease(db, row, OUTCOME_LEASE_EXPIRED, at)
        self._wake({row["queue"] for row in rows})  # pending again, or room under a limit
        return len(rows)

    def holders(self, host: str) -> list[Holder]:
        """One read."""
        with self._read() as db:
            rows = db.execute(Q["holders"], {"host": host}).fetchall()
        return [Holder.parse(row[0]) for row in rows]

    def end_leases(self, holders: Sequence[Holder], now: float | None = None) -> int:
        """One transaction: every lease of these holders ends as "worker lost" (DUR-02)."""
        if not holders:
            return 0
        with self._write() as db:
            at = self._now(now)
            ids = as_json(holder.id for holder in holders)
            rows = db.execute(Q["end_leases"], (ids,)).fetchall()
            for row in rows:
                end_lease(db, row, OUTCOME_WORKER_LOST, at)
        self._wake({row["queue"] for row in rows})
        return len(rows)

    # -- the user's requests ------------------------------------------------------------

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        """One transaction: a job not yet running is deleted (its dependents cancelled on
        record); a running one is marked; False for a final or unknown job. No wake-up: nothing
        becomes claimable."""
        with self._write() as db:
            at = self._now(now)
            row = db.execute(Q["job_by_id"], (job_id,)).fetchone()
            if row is None or row["state"] in STORED_FINAL:
                return False
            if row["state"] == RUNNING:
                db.execute(Q["cancel"], (row["seq"],))
                return True
            cancel_dependents(db, row["seq"], row["id"], CANCELLED, at)
            delete_jobs(db, [row["seq"]])
            return True

    def retry(self, job_id: str, now: float | None = None) -> bool:
        """One statement: a failed or cancelled job due again now with a fresh budget. False
        also when its dedup key is now held by another live job."""
        try:
            with self._write() as db:
                at = self._now(now)
                row = db.execute(Q["retry"], {"id": job_id, "now": at}).fetchone()
        except sqlite3.IntegrityError:
            return False
        if row is None:
            return False
        self._wake((row[0],))
        return True

    # -- reading --------------------------------------------------------------------------

    def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        """One read transaction: the snapshot, `ahead` for a pending job, executions if asked."""
        at = self._now(now)
        with self._read() as db:
            row = db.execute(Q["job_by_id"], (job_id,)).fetchone()
            if row is None:
                return None
            job = to_job(row, at)
            if row["state"] == PENDING:
                params = {
                    "queue": row["queue"],
                    "now": at,
                    "due": row["due"],
                    "priority": row["priority"],
                    "seq": row["seq"],
                }
                job.ahead = db.execute(Q["get_ahead"], params).fetchone()[0]
            if executions:
                rows = db.execute(Q["executions"], (row["seq"],)).fetchall()
                job.executions = [to_execution(r) for r in rows]
                if row["state"] == RUNNING and all(e.ended_at is not None for e in job.executions):
                    # The running attempt has no row until it ends (migration 5): its job's
                    # row says the same (an older version's claim wrote an open row instead).
                    job.executions.append(running_execution(row))
        return job

    def jobs(
        self,
        state: str | None = None,
        queue: str | None = None,
        limit: int = 100,
        now: float | None = None,
        newest: bool = False,
        offset: int = 0,
    ) -> list[Job]:
        """One read: jobs in a reported state (all when None), oldest (or newest) first."""
        if state is not None and state not in STATES:
            return []  # as the memory store: no job is ever in a state that does not exist
        at = self._now(now)
        split = state if state in ("scheduled", "waiting") else None
        stored = PENDING if split else state
        params = {"stored": stored, "queue": queue, "split": split, "now": at, "limit": limit}
        params["offset"] = int(offset)
        # The order written into the statement, not bound: `ORDER BY seq * :direction` made
        # SQLite sort every matching row; `ORDER BY seq DESC|ASC` walks the rowid and stops.
        # The state too (one of STATES, checked above): a constant lets SQLite walk jobs_state.
        direction = "DESC" if newest else "ASC"
        if stored is None:
            statement = Q["jobs"].format(direction=direction)
        else:
            index = "jobs_running" if stored == RUNNING else "jobs_state"
            statement = Q["jobs_in_state"].format(direction=direction, state=stored, index=index)
        with self._read() as db:
            rows = db.execute(statement, params).fetchall()
        return [to_job(row, at) for row in rows]

    def counts(self, now: float | None = None) -> dict[str, dict[str, int]]:
        """One read: queue -> reported state -> number (non-zero only)."""
        at = self._now(now)
        out: dict[str, dict[str, int]] = {}
        with self._read() as db:
            for queue, state, number in db.execute(Q["counts"], {"now": at}):
                out.setdefault(queue, {})[state] = number
        return out

    # -- housekeeping ---------------------------------------------------------------------

    def purge(self, now: float | None = None, limit: int = 1000) -> int:
        """One transaction: final jobs past their window go, with steps and executions."""
        with self._write() as db:
            at = self._now(now)
            seqs = [row[0] for row in db.execute(Q["purge"], {"now": at, "limit": limit})]
            delete_jobs(db, seqs)
        return len(seqs)

    def lead(self, name: str, holder: str, ttl: float, now: float | None = None) -> bool:
        """One statement: take the lease when free or expired, or renew it when held."""
        with self._write() as db:
            at = self._now(now)
            params = {"name": name, "holder": holder, "now": at, "ttl": ttl}
            return db.execute(Q["lead"], params).rowcount == 1

    def resign(self, name: str, holder: str) -> None:
        """One statement."""
        with self._write() as db:
            db.execute(Q["resign"], (name, holder))

    def resume(self, queue: str) -> None:
        """See SQLiteViews.resume; then wakes the queue: its waiting jobs are claimable again
        (one waiter; it passes the wake-up on if it leaves jobs behind)."""
        super().resume(queue)
        self._wake((queue,))

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """Sleep until a wake-up token comes on one of `queues` (channels.py: writers send one
        after commits that can make jobs of a queue claimable; one waiter of the queue on this
        host wakes), or the earliest scheduled job of `queues` falls due ("timed"), looking at
        PRAGMA data_version once a SAFETY_TICK too; poll data_version instead where the
        channels cannot be used. Either way a change since this thread's last look counts, so
        a job added between a claim and this call is not missed: a token stays in its channel
        until a waiter takes it, and data_version covers the commits before this thread's
        listener was made (its first wait, or other queues than last time; a thread's very
        first look only sets the baseline, as the polling does).

        A token's wake-up does not look at data_version (a read transaction: at a low rate
        about a tenth of the watcher's CPU per job): every commit since the last look is then
        told by that True, and the baseline stays where it was. A wait that ends without a
        token looks, unless a token came since the last look and that look is less than a
        SAFETY_TICK old; so a commit that sends no token (an enqueue in the caller's own
        transaction) is told by a later token's True or, at the latest, by the look a
        SAFETY_TICK after the last one. The first look after a run of tokens sees their
        commits too and wakes the caller once more (a spurious wake-up, allowed).

        The earliest scheduled due time (`_read_due`: a few index probes) is read at a
        thread's first wait on its queues, and again after a SCHEDULED token (a job of them
        was scheduled for later: the writer sends one, which one waiter takes), after a look
        that saw a change (a job scheduled in the caller's own transaction, or whose token
        another waiter took: those are known within a SAFETY_TICK), and once that time has
        come; never per wake-up token, so a busy queue's wake-ups cost no read."""
        deadline = time.monotonic() + max(timeout, 0.0)
        self._pool.ensure_open()  # raises once the store was closed
        listener, new = self._channels.listen(queues)
        state = self._wait_state(queues)
        if listener is None:
            return self._poll(deadline, queues, state)
        if new:
            state.tokens, state.due_at = False, None
            if self._looked(state):
                return True
        while True:
            clock = time.monotonic()
            if state.due_at is None:
                state.due_at = self._read_due(queues)
            if clock >= state.due_at:
                state.due_at = None  # read again at the next wait: the job is due now
                return True
            left = deadline - clock
            if listener.ready(max(0.0, min(left, SAFETY_TICK, state.due_at - clock))):
                if listener.scheduled:
                    listener.scheduled, state.due_at = False, None
                state.tokens = True
                return True
            if listener.scheduled:  # a job scheduled for later: its due time may come first
                listener.scheduled, state.due_at = False, None
                if left <= 0:
                    return False
                continue
            if listener.stale():
                self._channels.close()  # a FIFO replaced: the next wait opens the new one
                return True
            if time.monotonic() >= state.due_at:
                state.due_at = None
                return True
            recent = time.monotonic() - state.looked_at < SAFETY_TICK
            if not (state.tokens and recent) and self._looked(state):
                return True  # a commit that woke no channel, or one of ours: look again
            if left <= SAFETY_TICK:
                return False

    def _wait_state(self, queues: Sequence[str]) -> threading.local:
        """This thread's waiting state: whether a token came since its last look at
        data_version (`tokens`), when that look was (`looked_at`, monotonic), and when the
        earliest scheduled job of `queues` falls due (`due_at`, monotonic; inf: none; None:
        to be read; read again when the thread waits on other queues)."""
        state = self._waits
        if not hasattr(state, "tokens"):
            state.tokens, state.looked_at, state.due_at, state.due_for = False, float("-inf"), None, ()
        key = tuple(queues)
        if state.due_for != key:
            state.due_for, state.due_at = key, None
        return state

    def _looked(self, state: threading.local) -> bool:
        """A look at data_version on this thread's wait connection (`_changed_since`), noted.
        A change may have scheduled a job without a token this thread saw: the due time is
        read again."""
        changed = self._changed_since(self._pool.get("wait"))
        state.tokens, state.looked_at = False, time.monotonic()
        if changed:
            state.due_at = None
        return changed

    def _read_due(self, queues: Sequence[str]) -> float:
        """The monotonic time by which the earliest scheduled (pending, not yet due) job of
        `queues` falls due, inf when there is none. A read that fails (the file locked during
        recovery, say) gives a SAFETY_TICK from now: the wait then returns, and reads again."""
        try:
            row = (
                self._pool.get("wait")
                .execute(Q["until_due"], {"queues": as_json(queues), "now": time.time()})
                .fetchone()
            )
        except sqlite3.OperationalError:
            return time.monotonic() + SAFETY_TICK
        if row is None or row[0] is None:
            return float("inf")
        # A millisecond late rather than early: the claim that follows compares the due time
        # with time.time(), which may run a little apart from the monotonic clock.
        return time.monotonic() + max(0.0, float(row[0])) + DUE_MARGIN

    def _pause_for_lock(self, seconds: float) -> None:
        """begin_immediate's wait between two tries at the write lock: until another writer of
        this host commits (the unlock bell) or `seconds` pass. A new watch has not seen the
        commits before it, so its first wait only sets it up (the next try comes at once)."""
        watch, new = self._unlock.watch()
        if watch is None:
            time.sleep(seconds)
        elif not new:
            watch.ready(seconds)

    def _changed_since(self, conn: sqlite3.Connection) -> bool:
        """Whether data_version moved since this connection's last look (it changes when
        another connection commits); a locked file counts as a change (a spurious wake-up)."""
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.OperationalError:
            return True
        last = self._seen.get(id(conn))
        self._seen[id(conn)] = version
        return last is not None and version != last

    def _poll(self, deadline: float, queues: Sequence[str], state: threading.local) -> bool:
        """The fallback: poll data_version every millisecond while the store is busy, every
        10 ms once it was quiet for a second; and return when the earliest scheduled job of
        `queues` falls due (read when data_version moved, and once that time has come)."""
        while True:
            conn = self._pool.get("wait")  # each turn: raises once the store was closed
            clock = time.monotonic()
            if self._changed_since(conn):
                self._changed[id(conn)] = clock
                state.due_at = None
                return True
            if state.due_at is None:
                state.due_at = self._read_due(queues)
            if clock >= state.due_at:
                state.due_at = None
                return True
            if clock >= deadline:
                return False
            quiet = clock - self._changed.setdefault(id(conn), clock) >= QUIET_AFTER
            time.sleep(WAIT_POLL_QUIET if quiet else WAIT_POLL_BUSY)

    def close(self) -> None:
        """Close the connections; the store is unusable afterwards (see Pool.close)."""
        self._pool.close()
        self._channels.close()
        self._unlock.close()


class _Write:
    """SQLiteStore._write's transaction: BEGIN IMMEDIATE (connection.begin_immediate), COMMIT
    and the unlock bell, or ROLLBACK; then the check that the file is still the one at the path
    (Pool.written_to_current_file). A class, not a @contextmanager generator: every enqueue and
    settlement goes through here, and the generator's frame, its resumptions and contextlib's
    wrapper cost more than two plain methods."""

    __slots__ = ("store", "conn")

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self.store
        try:
            conn = self.conn = store._pool.get()
            begin_immediate(conn, store.url, store._pause_for_lock)
        except sqlite3.OperationalError as err:
            raise store._unavailable(err) from None
        return conn

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        store, conn = self.store, self.conn
        try:
            if kind is None:
                try:
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                store._unlock.ring()
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.OperationalError as err:
            raise store._unavailable(err) from None
        if kind is not None:
            if issubclass(kind, sqlite3.OperationalError):
                raise store._unavailable(error) from None  # type: ignore[arg-type]
            return  # the caller's exception goes on
        store._pool.written_to_current_file()


def _limited(policy: QueuePolicy | None) -> bool:
    """Whether a lease ending on the queue can let a waiting job start (a concurrency limit);
    an unknown queue (None) counts as limited."""
    return policy is None or policy.concurrency is not None or policy.group_concurrency is not None


def _woken_by(jobs: Sequence[NewJob], now: float) -> tuple[set[str], set[str]]:
    """The queues to wake after an enqueue commits: those of the jobs due now, and those of the
    jobs due later (their waiters read the earliest scheduled due time again, and wait until
    then: see SQLiteStore.wait). A job that waits for others may be pending at once (its
    parents done), so it counts as due now, and as scheduled when its own due time is later."""
    due: set[str] = set()
    later: set[str] = set()
    for job in jobs:
        is_later = due_of(job, now) > now
        if job.after or not is_later:
            due.add(job.queue)
        if is_later:
            later.add(job.queue)
    return due, later


def _explained(err: sqlite3.Error, path: str) -> str:
    """SQLite's error, with the plain reason when one is visible ("disk I/O error" alone does not
    say that the file was made read-only or immutable)."""
    reason = None if "locked" in str(err) else why_unwritable(path)
    return f"{err}: {reason}" if reason else str(err)
