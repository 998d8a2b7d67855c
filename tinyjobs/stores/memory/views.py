"""The memory store's dashboard operations: browse, stats, series, pause, delete, heartbeats.

A mixin of MemoryStore (it uses the store's lock, rows, indexes and helpers). browse, dependents
and the execution figures walk every row: the memory store is for tests and trying tinyjobs out,
not for a million jobs; what a worker or its reaper calls does not (index.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING

from tinyjobs.job import BLOCKED, CANCELLED, DONE, Job

from .. import rules
from ..base import ExecutionStats, JobFilter, QueueStats, WorkerBeat
from ..views import (
    bucket_start,
    check_bounds,
    check_browse,
    check_queue,
    check_series,
    cumulative,
    decode_cursor,
    encode_cursor,
    liveness,
    text_matches,
)
from .index import Index
from .rows import Row

if TYPE_CHECKING:
    from collections.abc import Callable

    class _Base:
        _rows: dict[str, Row]
        _index: Index
        _paused: set[str]
        _beats: dict[tuple[str, int], WorkerBeat]
        _read: Callable[[], AbstractContextManager[None]]
        _write: Callable[[], AbstractContextManager[None]]
        _delete: Callable[[Row], None]
        _finish: Callable[[Row, str, str | None, float], None]

        @staticmethod
        def _at(now: float | None) -> float: ...

        def _count(self, t: float) -> dict[str, dict[str, int]]: ...
else:
    _Base = object


class MemoryViews(_Base):
    """browse, dependents, steps, queue_stats, finished_series, execution_stats, pause, resume,
    paused, delete, beat, workers: see the Store protocol and docs/store-contract.md."""

    def browse(
        self,
        filter: JobFilter,
        cursor: str | None = None,
        limit: int = 50,
        now: float | None = None,
    ) -> tuple[list[Job], str | None]:
        check_browse(filter, limit)
        after = decode_cursor(cursor) if cursor else None
        t = self._at(now)
        with self._read():
            rows = sorted(self._rows.values(), key=lambda r: (r.created_at, r.id), reverse=True)
            page: list[Row] = []
            for row in rows:
                if after is not None and (row.created_at, row.id) >= after:
                    continue
                if _matches(row, filter, t):
                    page.append(row)
                    if len(page) > limit:
                        break
            jobs = [r.snapshot(t) for r in page[:limit]]
        last = page[limit - 1] if len(page) > limit else None
        return jobs, None if last is None else encode_cursor(last.created_at, last.id)

    def dependents(self, job_id: str, limit: int = 100) -> list[Job]:
        with self._read():
            rows = sorted((r for r in self._rows.values() if job_id in r.after), key=lambda r: r.seq)
            t = self._at(None)
            return [r.snapshot(t) for r in rows[:limit]]

    def steps(self, job_id: str) -> dict[str, str]:
        with self._read():
            row = self._rows.get(job_id)
            return {} if row is None else dict(row.steps)

    def queue_stats(self, now: float | None = None) -> list[QueueStats]:
        t = self._at(now)
        oldest: dict[str, float] = {}
        past: dict[str, int] = {}
        with self._read():
            counts = self._count(t)
            for queue, pending in self._index.pending.items():
                due = [r.due for r in pending.values() if r.due <= t]
                if due:
                    oldest[queue] = min(due)
            for row in self._index.running.values():  # leases past their expiry, not yet reaped
                if row.lease_expired(t):
                    past[row.queue] = past.get(row.queue, 0) + 1
            paused = set(self._paused)
        return [
            QueueStats(
                name, counts.get(name, {}), oldest.get(name), name in paused, past_lease=past.get(name, 0)
            )
            for name in sorted(set(counts) | paused)
        ]

    def finished_series(
        self, since: float, step: float = 60.0, now: float | None = None
    ) -> list[tuple[float, str, int]]:
        check_series(since, step)
        t = self._at(now)
        found: dict[tuple[float, str], int] = {}
        with self._read():
            for row in self._rows.values():
                for e in row.executions:
                    if e.outcome is not None and e.ended_at is not None and since <= e.ended_at <= t:
                        key = (bucket_start(e.ended_at, since, step), e.outcome)
                        found[key] = found.get(key, 0) + 1
        return [(start, outcome, n) for (start, outcome), n in sorted(found.items())]

    def execution_stats(self, bounds: Sequence[float], now: float | None = None) -> list[ExecutionStats]:
        limits = check_bounds(bounds)
        durations: dict[tuple[str, str], list[float]] = {}
        with self._read():
            for row in self._rows.values():
                for e in row.executions:
                    if e.outcome is not None and e.ended_at is not None:
                        key = (row.queue, e.outcome)
                        durations.setdefault(key, []).append(max(0.0, e.ended_at - e.started_at))
        return [
            ExecutionStats(queue, outcome, len(values), sum(values), cumulative(values, limits))
            for (queue, outcome), values in sorted(durations.items())
        ]

    def pause(self, queue: str) -> None:
        check_queue(queue)
        with self._write():
            self._paused.add(queue)

    def resume(self, queue: str) -> None:
        check_queue(queue)
        with self._write():  # the write wakes every waiting worker
            self._paused.discard(queue)

    def paused(self) -> set[str]:
        with self._read():
            return set(self._paused)

    def delete(self, job_id: str, now: float | None = None) -> bool:
        t = self._at(now)
        with self._write():
            row = self._rows.get(job_id)
            if row is None:
                return False
            self._delete(row)  # the row and its lease token: a late settlement finds nothing
            if row.state != DONE:
                reason = rules.dependency_error(row.id, rules.DELETED)
                for child in _blocked_after(self._index.blocked.values(), row.id):
                    self._finish(child, CANCELLED, reason, t)
            return True

    def beat(self, worker: WorkerBeat, now: float | None = None) -> None:
        t = self._at(now)
        with self._write():
            self._beats[(worker.host, worker.pid)] = replace(worker, seen_at=t, lost=False)

    def workers(self, within: float = 15.0, now: float | None = None) -> list[WorkerBeat]:
        t = self._at(now)
        with self._write():
            out: list[WorkerBeat] = []
            for key in sorted(self._beats):
                seen = liveness(self._beats[key], within, t)
                if seen is None:
                    del self._beats[key]
                else:
                    out.append(seen)
            return out


def _matches(row: Row, filter: JobFilter, now: float) -> bool:
    if filter.queue is not None and row.queue != filter.queue:
        return False
    if filter.task is not None and row.task != filter.task:
        return False
    if filter.state is not None and row.reported_state(now) != filter.state:
        return False
    return filter.text is None or text_matches(filter.text, row.id, row.payload, row.error)


def _blocked_after(rows: Iterable[Row], parent_id: str) -> list[Row]:
    return [r for r in rows if r.state == BLOCKED and parent_id in r.after]
