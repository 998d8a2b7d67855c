"""The `memory://` store: jobs in this process's memory, for tests and for trying tinyjobs out.

It is the reference implementation of the Store protocol (tinyjobs/stores/base.py) and of
docs/store-contract.md: every other store must agree with it on the contract suite. One lock
makes each operation atomic; a Condition on that lock wakes `wait()` on every change. It has
no transactions (`enqueue(conn=...)` raises NotSupported) and is not shared between processes.

Every change of a row's state goes through `_set` (and every new or removed row through `_add`
and `_delete`), which keep the indexes (index.py) that let claim, settle and purge cost what
they take, not what the store holds.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tinyjobs.errors import ConfigError, NotSupported, StoreError
from tinyjobs.holder import Holder
from tinyjobs.job import (
    BLOCKED,
    CANCELLED,
    DONE,
    FAILED,
    OUTCOME_LEASE_EXPIRED,
    OUTCOME_WORKER_LOST,
    RUNNING,
    SCHEDULED,
    WAITING,
    Job,
    bound_error,
)
from tinyjobs.urls import mask

from .. import rules
from ..base import Claimed, LeaseStatus, NewJob, QueuePolicy, Settlement, WorkerBeat, settle_then_claim
from ..rules import PENDING, STORED_FINAL
from .index import Index, Ready
from .rows import ExecutionRow, Limits, Row, Scope, ahead
from .views import MemoryViews

URL = "memory://"


def open(url: str, **options: Any) -> MemoryStore:
    """A fresh, empty memory store. `url` must be exactly `memory://`; other options are
    accepted for symmetry with the other stores and ignored (there is nothing to tune)."""
    if url != URL:
        raise ConfigError(f"memory store URL {mask(url)!r} must be exactly {URL!r}: it takes no path")
    return MemoryStore()


class MemoryStore(MemoryViews):
    """A Store in this process. Thread-safe; each operation is atomic under one lock."""

    capabilities: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.url = URL
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._version = 0  # bumped on every write; wait() watches it
        self._closed = False
        # Insertion order is enqueue order (seq): a row is only ever added with the next seq.
        self._rows: dict[str, Row] = {}
        self._index = Index()
        self._tokens: dict[str, str] = {}  # live lease token -> job id
        self._keys: dict[str, str] = {}  # dedup key -> id of the job that last took it
        self._seq = itertools.count(1)
        # Recent claim times per (queue, None) and per (queue, group), for rates (LIM-02).
        self._starts: dict[Scope, deque[float]] = {}
        self._cron: dict[str, float] = {}
        self._leaders: dict[str, tuple[str, float]] = {}
        self._paused: set[str] = set()  # LIM-04: queues no claim takes from
        self._beats: dict[tuple[str, int], WorkerBeat] = {}  # (host, pid) -> last heartbeat

    # -- plumbing ---------------------------------------------------------------------------

    def now(self) -> float:
        return time.time()

    @staticmethod
    def _at(now: float | None) -> float:
        return time.time() if now is None else float(now)

    @contextmanager
    def _read(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise StoreError("the memory:// store is closed")
            yield

    @contextmanager
    def _write(self) -> Iterator[None]:
        """A read that also wakes every waiter once it completed (not when it raised)."""
        with self._read():
            yield
            self._version += 1
            self._changed.notify_all()

    # -- enqueue ----------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        """Add jobs atomically (JOB-09 dedupe, DEP-01 `after`); see the Store protocol."""
        if conn is not None:
            raise NotSupported(
                "the memory:// store has no transactions: enqueue(conn=...) needs a SQLite or "
                "PostgreSQL store"
            )
        t = self._at(now)
        with self._write():
            self._check_parents(jobs)
            return [self._add(new, t) for new in jobs]

    def _check_parents(self, jobs: Sequence[NewJob]) -> None:
        """Raise JobNotFound before anything is written when an `after` id does not exist.
        A job earlier in the same batch counts as existing: the batch is added in order."""
        batch: set[str] = set()
        for new in jobs:
            for parent in new.after:
                if parent not in self._rows and parent not in batch:
                    raise rules.unknown_parent(new.id, parent)
            batch.add(new.id)

    def _add(self, new: NewJob, t: float) -> Job:
        old = self._rows.get(new.id)
        if old is not None and old.holds_id(t):
            return old.snapshot(t, created=False)
        holder = self._key_holder(new.key)
        if holder is not None:
            return holder.snapshot(t, created=False)
        if old is not None:  # failed, cancelled, or done past its window: replaced
            self._delete(old)
        row = Row.new(new, next(self._seq), t)
        self._rows[row.id] = row
        self._index.add(row)
        if row.key is not None:
            self._keys[row.key] = row.id
        # A parent missing here was named earlier in the batch and not added (its key was held).
        parents = [(p.id, p.state) for p in map(self._rows.get, row.after) if p is not None]
        state, error = rules.initial_state(parents)
        if state == CANCELLED:
            self._finish(row, CANCELLED, error, t)
        elif state != row.state:
            self._set(row, state)
        return row.snapshot(t)

    def _set(self, row: Row, state: str) -> None:
        """Change the state of an indexed row (its due time and expiry already set)."""
        self._index.remove(row)
        row.state = state
        self._index.add(row)

    def _key_holder(self, key: str | None) -> Row | None:
        """The live job holding dedup `key`, if any (the index is checked lazily)."""
        if key is None:
            return None
        row = self._rows.get(self._keys.get(key, ""))
        return row if row is not None and row.key == key and row.live else None

    # -- claim, renew, steps, settle ---------------------------------------------------------

    def claim(
        self,
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> list[Claimed]:
        """Lease up to `limit` due jobs in claim order, within every limit (JOB-01, LIM-01..03)."""
        with self._write():
            t = self._at(now)  # read under the lock: a claim that waited must not judge rates by an old now
            index = self._index
            # The head of each queue's heap; a paused queue's jobs are not taken (LIM-04),
            # checked under the claim's lock.
            heads: dict[str, Ready] = {}
            for name in queues:
                head = None if name in self._paused else index.head(name, t)
                if head is not None:
                    heads[name] = head
            limits = Limits(index.running.values(), self._starts, t)
            claimed: list[Claimed] = []
            aside: list[tuple[str, Ready]] = []
            while heads and len(claimed) < limit:
                name = min(heads, key=heads.__getitem__)  # the queues' heads merged in claim order
                entry, row, policy = heads[name], index.pop(name), queues[name]
                if limits.room(row, policy):
                    limits.take(row)
                    claimed.append(self._take(row, policy, holder, t))
                else:
                    # A job of a full group is set aside; other groups' jobs go on (LIM-03). A
                    # full queue has no room for any of its jobs: it is done for this claim.
                    aside.append((name, entry))
                    if not limits.queue_room(name, policy):
                        del heads[name]
                        continue
                head = index.head(name, t)
                if head is None:
                    del heads[name]
                else:
                    heads[name] = head
            for name, entry in aside:
                index.put_back(name, entry)
            return claimed

    def _take(self, row: Row, policy: QueuePolicy, holder: Holder, t: float) -> Claimed:
        self._set(row, RUNNING)
        row.attempts += 1  # counted at claim, before the handler runs (JOB-03)
        row.started_at = t
        row.token = secrets.token_hex(16)
        row.lease_seconds = policy.lease
        row.lease_expires = t + policy.lease
        row.holder = holder.id
        row.executions.append(ExecutionRow(row.attempts, holder.hostname, holder.pid, t))
        self._tokens[row.token] = row.id
        return Claimed(row.snapshot(t), row.token, row.lease_seconds, dict(row.steps))

    def _leased(self, token: str) -> Row | None:
        """The running job whose lease `token` is, or None once the lease was lost (JOB-05)."""
        row = self._rows.get(self._tokens.get(token, ""))
        return row if row is not None and row.state == RUNNING and row.token == token else None

    def renew(self, tokens: Sequence[str], now: float | None = None) -> dict[str, LeaseStatus]:
        """Extend live leases; "lost" for a token no longer on its job, "cancel" when asked."""
        t = self._at(now)
        statuses: dict[str, LeaseStatus] = {}
        with self._write():
            for token in tokens:
                row = self._leased(token)
                if row is None:
                    statuses[token] = "lost"
                    continue
                row.lease_expires = t + row.lease_seconds
                statuses[token] = "cancel" if row.cancel_requested else "ok"
        return statuses

    def save_step(self, token: str, name: str, value: str, now: float | None = None) -> bool:
        """Keep a step's value under the job while `token` holds it (JOB-06)."""
        with self._write():
            row = self._leased(token)
            if row is None:
                return False
            row.steps[name] = value
            return True

    # The two atomic steps in turn (the protocol's settle_then_claim, used as a method).
    settle_and_claim = settle_then_claim

    def settle(self, settlements: Sequence[Settlement], now: float | None = None) -> list[bool]:
        """Apply each settlement whose lease is still held; see docs/store-contract.md."""
        t = self._at(now)
        with self._write():
            return [self._settle_one(s, t) for s in settlements]

    def _settle_one(self, s: Settlement, t: float) -> bool:
        row = self._leased(s.token)
        if row is None or row.id != s.job_id:
            return False
        error = bound_error(s.error)
        state = rules.settled_state(s.outcome, row.cancel_requested, row.attempts, row.max_attempts)
        outcome = rules.execution_outcome(s.outcome, s.execution, row.cancel_requested)
        self._end_attempt(row, t, outcome, error)
        if state == CANCELLED:
            self._finish(row, CANCELLED, rules.CANCELLED_WHILE_RUNNING, t)
        elif state == DONE:
            row.result = s.result
            self._finish(row, DONE, None, t)
        elif state == FAILED:
            self._finish(row, FAILED, error, t)
        else:
            if s.outcome == "retry":
                row.error = error
            if s.outcome in rules.GIVES_BACK:
                row.attempts -= 1
            if s.outcome != "handback":  # a hand-back keeps its due time: due again at once
                row.due = t + s.delay
            self._set(row, PENDING)
        return True

    def _end_attempt(self, row: Row, t: float, outcome: str, error: str | None) -> None:
        """Close the open execution and clear the lease, so the token is lost from now on."""
        execution = row.executions[-1]
        execution.ended_at, execution.outcome, execution.error = t, outcome, error
        self._tokens.pop(row.token or "", None)
        row.token = row.holder = row.lease_expires = None

    def _finish(self, row: Row, state: str, error: str | None, t: float) -> None:
        """Make `row` final (done, failed or cancelled) and tell its dependents."""
        row.error, row.finished_at = error, t
        row.expires_at = rules.expires_at(state, t, row.dedupe, row.keep)
        self._set(row, state)
        self._release_dependents(row, t)

    def _release_dependents(self, parent: Row, t: float) -> None:
        """DEP-01: a parent that will never be done cancels its blocked dependents (and theirs,
        recursively) on record; a done one makes those whose parents are all done pending."""
        for child in [r for r in self._index.blocked.values() if parent.id in r.after]:
            if parent.state != DONE:
                self._finish(child, CANCELLED, rules.dependency_error(parent.id, parent.state), t)
            elif all(self._parent_done(p) for p in child.after):
                # A dependent never runs before its own due time, nor before its parents are done.
                child.due = max(child.due, t)
                self._set(child, PENDING)

    def _parent_done(self, parent_id: str) -> bool:
        # A missing parent of a blocked job was done and purged: a parent that failed or was
        # cancelled would have cancelled the job already.
        parent = self._rows.get(parent_id)
        return parent is None or parent.state == DONE

    # -- lost leases ------------------------------------------------------------------------

    def reap(self, now: float | None = None, limit: int = 1000) -> int:
        """End expired leases, oldest expiry first (JOB-04)."""
        t = self._at(now)
        with self._write():
            expired = [r for r in self._index.running.values() if r.lease_expired(t)]
            expired = sorted(expired, key=lambda r: r.lease_expires or 0.0)[:limit]
            for row in expired:
                self._lose(row, OUTCOME_LEASE_EXPIRED, t)
            return len(expired)

    def holders(self, host: str) -> list[Holder]:
        """The distinct holders of live leases on `host`, in id order."""
        with self._read():
            ids = {r.holder for r in self._index.running.values() if r.holder}
        found = [Holder.parse(i) for i in sorted(ids)]
        return [h for h in found if h.host == host]

    def end_leases(self, holders: Sequence[Holder], now: float | None = None) -> int:
        """End every lease of `holders` at once, whatever its expiry (DUR-02)."""
        t = self._at(now)
        gone = {h.id for h in holders}
        with self._write():
            rows = [r for r in self._index.running.values() if r.holder in gone]
            for row in rows:
                self._lose(row, OUTCOME_WORKER_LOST, t)
            return len(rows)

    def _lose(self, row: Row, outcome: str, t: float) -> None:
        """The attempt ended without a settlement; it stays counted (JOB-03)."""
        self._end_attempt(row, t, outcome, None)
        state, error = rules.lease_ended(outcome, row.cancel_requested, row.attempts, row.max_attempts)
        if state == PENDING:
            self._set(row, PENDING)  # due unchanged: due again at once
        else:
            self._finish(row, state, error, t)

    # -- the user's operations ----------------------------------------------------------------

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        """Remove a job not yet running, or mark a running one (JOB-08)."""
        t = self._at(now)
        with self._write():
            row = self._rows.get(job_id)
            if row is None or row.state in STORED_FINAL:
                return False
            if row.state == RUNNING:
                row.cancel_requested = True
                return True
            self._delete(row)  # a job cancelled before it ran is gone (JOB-08)
            row.state = CANCELLED
            self._release_dependents(row, t)
            return True

    def retry(self, job_id: str, now: float | None = None) -> bool:
        """Make a failed or cancelled job due now with a fresh budget of attempts."""
        t = self._at(now)
        with self._write():
            row = self._rows.get(job_id)
            if row is None or row.state not in (FAILED, CANCELLED):
                return False
            row.due, row.cancel_requested = t, False
            row.max_attempts = row.attempts + row.attempt_budget
            row.finished_at = row.expires_at = None
            self._set(row, PENDING)
            return True

    def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        """The job's snapshot with `ahead` when pending (JOB-11); None when unknown."""
        t = self._at(now)
        with self._read():
            row = self._rows.get(job_id)
            if row is None:
                return None
            # `ahead` walks the pending rows of the job's queue only.
            pending = self._index.pending.get(row.queue, {}).values()
            return row.snapshot(t, ahead=ahead(row, pending, t), executions=executions)

    def jobs(
        self,
        state: str | None = None,
        queue: str | None = None,
        limit: int = 100,
        now: float | None = None,
        newest: bool = False,
        offset: int = 0,
    ) -> list[Job]:
        """Jobs in a reported state (all when None), oldest (or newest) first."""
        t = self._at(now)
        with self._read():
            found = (
                r for r in self._candidates(state, queue, newest) if state in (None, r.reported_state(t))
            )
            if queue is not None:
                found = (r for r in found if r.queue == queue)
            return [r.snapshot(t) for r in itertools.islice(found, offset, offset + limit)]

    def _candidates(self, state: str | None, queue: str | None, newest: bool) -> Iterable[Row]:
        """The rows that may be in reported `state`, in seq order (reversed when `newest`): the
        live states' from their index, the others' from every row, which are in seq order."""
        index = self._index
        if state in (WAITING, SCHEDULED):
            by_queue = index.pending if queue is None else {queue: index.pending.get(queue, {})}
            live: list[Row] = [r for rows in by_queue.values() for r in rows.values()]
        elif state in (RUNNING, BLOCKED):
            live = list((index.running if state == RUNNING else index.blocked).values())
        else:
            return reversed(self._rows.values()) if newest else self._rows.values()
        return sorted(live, key=lambda r: r.seq, reverse=newest)

    def counts(self, now: float | None = None) -> dict[str, dict[str, int]]:
        t = self._at(now)
        with self._read():
            return self._count(t)

    def _count(self, t: float) -> dict[str, dict[str, int]]:
        """counts() under the lock: the kept counts of the stored states, with the pending rows
        split into scheduled and waiting by due time (this walks the pending rows only)."""
        out = {queue: dict(by_state) for queue, by_state in self._index.counts.items()}
        for queue, by_state in out.items():
            if by_state.pop(PENDING, 0):
                pending = self._index.pending[queue].values()
                scheduled = sum(1 for r in pending if r.due > t)
                for state, n in ((SCHEDULED, scheduled), (WAITING, len(pending) - scheduled)):
                    if n:
                        by_state[state] = n
        return out

    def purge(self, now: float | None = None, limit: int = 1000) -> int:
        """Remove final jobs past their window, with their steps and executions (JOB-10)."""
        t = self._at(now)
        with self._write():
            old = self._index.expired(self._rows, t, limit)
            for row in old:
                self._delete(row)
            return len(old)

    def _delete(self, row: Row) -> None:
        if self._rows.get(row.id) is row:
            del self._rows[row.id]
            self._index.remove(row)
        self._tokens.pop(row.token or "", None)

    # -- cron and leadership ------------------------------------------------------------------

    def fire_cron(self, schedule: str, due: float, job: NewJob, now: float | None = None) -> bool:
        """Enqueue `job` for `due` once, only when `due` is later than the last fired (CRON-01)."""
        t = self._at(now)
        with self._write():
            last = self._cron.get(schedule)
            if last is not None and due <= last:
                return False
            self._check_parents([job])
            self._add(job, t)
            self._cron[schedule] = due
            return True

    def cron_last(self, schedule: str) -> float | None:
        with self._read():
            return self._cron.get(schedule)

    def lead(self, name: str, holder: str, ttl: float, now: float | None = None) -> bool:
        """Take or renew the named lease when free, expired, or already `holder`'s."""
        t = self._at(now)
        with self._write():
            current = self._leaders.get(name)
            if current is not None and current[0] != holder and current[1] > t:
                return False
            self._leaders[name] = (holder, t + ttl)
            return True

    def resign(self, name: str, holder: str) -> None:
        with self._write():
            if self._leaders.get(name, ("", 0.0))[0] == holder:
                del self._leaders[name]

    # -- waiting and closing ------------------------------------------------------------------

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """Block until any write (any queue: spurious wake-ups are allowed) or `timeout`."""
        with self._read():
            start = self._version
            return self._changed.wait_for(lambda: self._version != start or self._closed, max(0.0, timeout))

    def aio(self) -> Any:
        """The async twin of the front door: the same calls, on the event loop itself (nothing
        here waits on I/O; stores/aio.py, InlineStore)."""
        from ..aio import InlineStore

        return InlineStore(self)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify_all()
