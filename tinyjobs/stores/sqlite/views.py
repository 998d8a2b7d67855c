"""The SQLite store's dashboard operations: browse, stats, series, pause, delete, heartbeats.

A mixin of SQLiteStore (it uses the store's `_read`, `_write` and `_now`). Nothing here is
written per enqueue (schema.sql, migration 3). Cost at 10^6 jobs: browse walks the table by seq
newest first and stops at the page, reading at most WINDOW seqs per call when filtered;
queue_stats reads job_counts and counts pending and running on their partial indexes;
finished_series walks executions_ended over the window asked; execution_stats reads the
exec_stats rollup. docs/store-contract.md states the contracts."""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from tinyjobs.job import Job

from ..base import ExecutionStats, JobFilter, QueueStats, WorkerBeat
from ..rules import DELETED
from ..views import (
    LOST_FACTOR,
    bucket_start,
    check_bounds,
    check_browse,
    check_queue,
    check_series,
    gather_stats,
    liveness,
    seq_cursor,
    seq_of,
    stored_state,
)
from .lifecycle import cancel_dependents, delete_jobs
from .rows import Q, to_job

if TYPE_CHECKING:

    class _Base:
        _read: Callable[[], AbstractContextManager[sqlite3.Connection]]
        _write: Callable[[], AbstractContextManager[sqlite3.Connection]]

        def _now(self, now: float | None) -> float: ...
else:
    _Base = object


# A filtered browse reads at most this many seqs per call (no index serves a filter: an index
# written per enqueue is what migration 3 took away).
WINDOW = 50_000
EXACT_SERIES = 6 * 3600  # finished_series reads the executions for windows up to this long


def paused_queues(db: sqlite3.Connection) -> set[str]:
    """The paused queues, read inside the caller's transaction (the claim's: LIM-04)."""
    return {row[0] for row in db.execute(Q["paused_queues"])}


class SQLiteViews(_Base):
    """See the Store protocol and docs/store-contract.md for each operation's contract."""

    def browse(
        self,
        filter: JobFilter,
        cursor: str | None = None,
        limit: int = 50,
        now: float | None = None,
    ) -> tuple[list[Job], str | None]:
        """Newest first by seq, walked on the table and stopping at the page. With any filter,
        one call reads at most WINDOW seqs back from where it starts, and a page that window
        did not fill comes back short (even empty) with a cursor to go on from the window's
        end."""
        check_browse(filter, limit)
        at = self._now(now)
        stored, split = stored_state(filter.state)
        params: dict[str, object] = {"limit": limit + 1, "now": at, "stored": stored, "split": split}
        where = [Q["browse_after"]]
        with self._read() as db:
            first, last = db.execute(Q["browse_ends"]).fetchone()
            start = last + 1
            if cursor:
                start = min(start, seq_of(cursor))
            params["after"] = start
            if stored is not None:
                where.append(Q["browse_state"])
            if split is not None:
                where.append(Q["browse_split"])
            for name in ("queue", "task", "text"):
                value = getattr(filter, name)
                if value is not None:
                    params[name] = value
                    where.append(Q[f"browse_{name}"])
            floor = start - WINDOW
            bounded = len(where) > 1 and floor > first  # any filter besides browse_after
            if bounded:
                params["floor"] = floor
                where.append(Q["browse_window"])
            sql = Q["browse"].replace("{where}", " AND ".join(where))
            rows = db.execute(sql, params).fetchall()
        jobs = [to_job(row, at) for row in rows[:limit]]
        if len(rows) > limit:
            return jobs, seq_cursor(rows[limit - 1]["seq"])
        return jobs, seq_cursor(floor) if bounded else None

    def dependents(self, job_id: str, limit: int = 100) -> list[Job]:
        at = self._now(None)
        with self._read() as db:
            rows = db.execute(Q["dependents"], {"id": job_id, "limit": limit}).fetchall()
        return [to_job(row, at) for row in rows]

    def steps(self, job_id: str) -> dict[str, str]:
        with self._read() as db:
            return dict(db.execute(Q["steps_by_id"], (job_id,)).fetchall())

    def queue_stats(self, now: float | None = None) -> list[QueueStats]:
        """Exact, without counting the finished jobs: job_counts (kept by triggers when a job
        reaches or leaves one of those states) gives blocked, done, failed and cancelled;
        pending (split into scheduled and waiting by due) and running are counted on their
        partial indexes, jobs_claim and jobs_running."""
        at = self._now(now)
        counts: dict[str, dict[str, int]] = {}
        oldest: dict[str, float] = {}

        def add(queue: str, state: str, n: int) -> None:
            if n > 0:
                counts.setdefault(queue, {})[state] = n

        with self._read() as db:
            for queue, state, n in db.execute(Q["job_counts"]):
                add(queue, state, n)
            for queue, pending, scheduled, first in db.execute(Q["pending_split"], {"now": at}):
                add(queue, "scheduled", scheduled or 0)
                add(queue, "waiting", pending - (scheduled or 0))
                if first is not None:
                    oldest[queue] = first
            for queue, n in db.execute(Q["running_counts"]):
                add(queue, "running", n)
            past = dict(db.execute(Q["past_lease"], {"now": at}).fetchall())
            paused = paused_queues(db)
        return [
            QueueStats(
                name, counts.get(name, {}), oldest.get(name), name in paused, past_lease=past.get(name, 0)
            )
            for name in sorted(set(counts) | paused)
        ]

    def finished_series(
        self, since: float, step: float = 60.0, now: float | None = None
    ) -> list[tuple[float, str, int]]:
        """Exact over the executions for windows up to EXACT_SERIES seconds; a longer one with
        whole-minute steps is read from the per-minute rollup, exact to the minute."""
        check_series(since, step)
        at = self._now(now)
        params = {"since": since, "step": step, "now": at}
        if at - since <= EXACT_SERIES or step % 60:
            with self._read() as db:
                return [(float(b), o, n) for b, o, n in db.execute(Q["finished_series"], params)]
        found: dict[tuple[float, str], int] = {}
        with self._read() as db:
            for minute, outcome, n in db.execute(Q["finished_minutes"], params):
                key = (bucket_start(minute, since, step), outcome)
                found[key] = found.get(key, 0) + n
        return [(b, o, n) for (b, o), n in sorted(found.items())]

    def execution_stats(self, bounds: Sequence[float], now: float | None = None) -> list[ExecutionStats]:
        """From exec_stats (kept by triggers): durations rounded up to 1 ms under 1 s, 10 ms
        under 10 s and 1 s beyond, exact for bounds that are whole numbers of those units."""
        limits = check_bounds(bounds)
        with self._read() as db:
            rows = db.execute(Q["execution_stats"]).fetchall()
        per = [(q, o, bisect.bisect_left(limits, upto), n, seconds) for q, o, upto, n, seconds in rows]
        return gather_stats(per, len(limits))

    def pause(self, queue: str) -> None:
        check_queue(queue)
        with self._write() as db:  # BEGIN IMMEDIATE: serialised with every claim
            db.execute(Q["pause"], (queue,))

    def resume(self, queue: str) -> None:
        check_queue(queue)
        with self._write() as db:  # the commit changes data_version: waiting workers look again
            db.execute(Q["resume"], (queue,))

    def paused(self) -> set[str]:
        with self._read() as db:
            return paused_queues(db)

    def delete(self, job_id: str, now: float | None = None) -> bool:
        with self._write() as db:
            at = self._now(now)
            row = db.execute(Q["job_by_id"], (job_id,)).fetchone()
            if row is None:
                return False
            if row["state"] != "done":
                cancel_dependents(db, row["seq"], row["id"], DELETED, at)
            delete_jobs(db, [row["seq"]])  # its token goes with the row: the lease is over
            return True

    def beat(self, worker: WorkerBeat, now: float | None = None) -> None:
        with self._write() as db:
            params = {
                "host": worker.host,
                "pid": worker.pid,
                "queues": json.dumps(list(worker.queues)),
                "slots": worker.slots,
                "busy": worker.busy,
                "started_at": worker.started_at,
                "now": self._now(now),
            }
            db.execute(Q["beat"], params)

    def workers(self, within: float = 15.0, now: float | None = None) -> list[WorkerBeat]:
        at = self._now(now)
        with self._read() as db:
            rows = db.execute(Q["workers"]).fetchall()
        beats = [
            WorkerBeat(host, pid, tuple(json.loads(queues)), slots, busy, started, seen)
            for host, pid, queues, slots, busy, started, seen in rows
        ]
        shown = [b for b in (liveness(beat, within, at) for beat in beats) if b is not None]
        if len(shown) < len(beats):  # a write only when there is something to drop
            with self._write() as db:
                db.execute(Q["drop_workers"], {"before": at - LOST_FACTOR * within})
        return shown
