"""The SQLite store: one file, WAL, every write one BEGIN IMMEDIATE transaction."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tinyjobs.errors import ConfigError, StoreUnavailable
from tinyjobs.holder import Holder
from tinyjobs.job import CANCELLED, OUTCOME_LEASE_EXPIRED, OUTCOME_WORKER_LOST, RUNNING, STATES, Job
from tinyjobs.stores.base import Claimed, LeaseStatus, NewJob, QueuePolicy, Settlement
from tinyjobs.stores.rules import PENDING, STORED_FINAL
from tinyjobs.urls import mask

from .claim import claim_jobs
from .connection import Target, immediate, snapshot
from .enqueue import enqueue_batch
from .filesystem import why_unwritable
from .lifecycle import cancel_dependents, delete_jobs, end_lease, settle_done_batch, settle_one
from .pool import Pool
from .rows import Q, as_json, to_execution, to_job
from .views import SQLiteViews

# PRAGMA data_version costs microseconds, but waking a thread a thousand times a second does not:
# poll every millisecond while jobs come and go, every 10 ms once the store was quiet a second.
WAIT_POLL_BUSY = 0.001
WAIT_POLL_QUIET = 0.010
QUIET_AFTER = 1.0
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

    capabilities = frozenset({"transactions", "shared"})

    def __init__(self, target: Target) -> None:
        self.url = target.url
        self.path = target.path
        self.synchronous = target.synchronous
        self._pool = Pool(target)
        self._seen: dict[int, int] = {}  # wait connection -> data_version last seen
        self._changed: dict[int, float] = {}  # wait connection -> when it last saw a change

    # -- plumbing -------------------------------------------------------------------------

    def now(self) -> float:
        """The process clock: SQLite has no server to ask."""
        return time.time()

    def _now(self, now: float | None) -> float:
        return time.time() if now is None else now

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on this thread's connection."""
        conn = self._pool.get()
        try:
            with immediate(conn, self.url):
                yield conn
        except sqlite3.OperationalError as err:
            raise StoreUnavailable(f"sqlite store {mask(self.url)!r}: {_explained(err, self.path)}") from None
        self._pool.written_to_current_file()

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
        if conn is not None:
            return self._enqueue_on(conn, jobs, self._now(now))
        with self._write() as db:
            return enqueue_batch(db.cursor(), jobs, self._now(now))

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
                    return enqueue_batch(cur, jobs, now)
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
        """One transaction: the settlements, then the claim (one fsync for both)."""
        with self._write() as db:
            at = self._now(now)
            applied = settle_done_batch(db, settlements, at)
            flags = [(s.job_id, s.token) in applied or settle_one(db, s, at) for s in settlements]
            claimed = claim_jobs(db, queues, holder, limit, at) if limit > 0 and queues else []
        return flags, claimed

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
        with self._write() as db:
            at = self._now(now)
            return claim_jobs(db, queues, holder, limit, at)

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
            at = self._now(now)
            applied = settle_done_batch(db, settlements, at)
            return [(s.job_id, s.token) in applied or settle_one(db, s, at) for s in settlements]

    def reap(self, now: float | None = None, limit: int = 1000) -> int:
        """One transaction: expired leases end as "lease expired"."""
        with self._write() as db:
            at = self._now(now)
            rows = db.execute(Q["reap"], (at, limit)).fetchall()
            for row in rows:
                end_lease(db, row, OUTCOME_LEASE_EXPIRED, at)
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
        return len(rows)

    # -- the user's requests ------------------------------------------------------------

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        """One transaction: a job not yet running is deleted (its dependents cancelled on
        record); a running one is marked; False for a final or unknown job."""
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
                return db.execute(Q["retry"], {"id": job_id, "now": at}).rowcount == 1
        except sqlite3.IntegrityError:
            return False

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
        params.update(direction=-1 if newest else 1, offset=int(offset))
        with self._read() as db:
            rows = db.execute(Q["jobs"], params).fetchall()
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

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """Poll PRAGMA data_version (it changes when another connection commits) on a
        connection of its own: every millisecond while the store is busy, every 10 ms once it
        was quiet for a second. A change since this thread's last look counts too, so a
        job added between a claim and this call is not missed."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            conn = self._pool.get("wait")  # each turn: raises once the store was closed
            try:
                version = conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.OperationalError:
                return True  # locked for recovery or the like: a spurious wake-up is allowed
            last = self._seen.get(id(conn))
            self._seen[id(conn)] = version
            clock = time.monotonic()
            if last is not None and version != last:
                self._changed[id(conn)] = clock
                return True
            if clock >= deadline:
                return False
            quiet = clock - self._changed.setdefault(id(conn), clock) >= QUIET_AFTER
            time.sleep(WAIT_POLL_QUIET if quiet else WAIT_POLL_BUSY)

    def close(self) -> None:
        """Close the connections; the store is unusable afterwards (see Pool.close)."""
        self._pool.close()


def _explained(err: sqlite3.Error, path: str) -> str:
    """SQLite's error, with the plain reason when one is visible ("disk I/O error" alone does not
    say that the file was made read-only or immutable)."""
    reason = None if "locked" in str(err) else why_unwritable(path)
    return f"{err}: {reason}" if reason else str(err)
