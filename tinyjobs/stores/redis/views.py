"""The Redis store's dashboard operations: browse, stats, series, pause, delete, heartbeats.

A mixin of RedisStore (it uses the store's `_run`). Each is one Lua script (browse: one or more,
each bounded). What they read, at 10^6 jobs: browse walks P:created (a sorted set of every job by
created_at) newest first and stops at the page, up to BROWSE_BUDGET rows per script call (a
rare filter means several calls; a state filter on a small final-state index reads that index);
queue_stats reads counters, sorted-set sizes and one head per priority; finished_series one
ZCOUNT per non-empty (bucket, outcome) on P:ended:<outcome> (or the window's few entries);
execution_stats one ZCOUNT per (queue, outcome) and bound. No KEYS or SCAN per request.
docs/store-contract.md has the contracts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...job import Job
from ..base import ExecutionStats, JobFilter, QueueStats, WorkerBeat
from ..views import (
    LOST_FACTOR,
    check_bounds,
    check_browse,
    check_queue,
    check_series,
    decode_cursor,
    encode_cursor,
    liveness,
)
from . import codec

if TYPE_CHECKING:
    from .connection import Connection

    class _Base:
        base: str
        _conn: Connection

        def _run(self, name: str, args: list[Any], safe: bool = True) -> Any: ...
else:
    _Base = object

BROWSE_BUDGET = 5000  # rows one browse script call may read before it hands back
# Rows one browse page may read in all (about 25 us each, loading the job's hash: some 50 ms):
# a page it does not fill comes back short, with a cursor to go on from where it stopped
# (docs/store-contract.md).
BROWSE_WINDOW = 2000


def _list(value: Any) -> list:
    """A JSON array from Lua: cjson encodes an empty table as {}."""
    return value if isinstance(value, list) else []


class RedisViews(_Base):
    """See the Store protocol and docs/store-contract.md for each operation's contract."""

    def browse(
        self,
        filter: JobFilter,
        cursor: str | None = None,
        limit: int = 50,
        now: float | None = None,
    ) -> tuple[list[Job], str | None]:
        check_browse(filter, limit)
        at_text, after_id = ("", "")
        if cursor:
            after_at, after_id = decode_cursor(cursor)
            at_text = repr(after_at)
        clock = codec.now_arg(now)
        rows: list[tuple[str, dict[str, str]]] = []
        at, read, stopped = 0.0, 0, False
        while True:
            args = [
                clock,
                at_text,
                after_id,
                limit + 1 - len(rows),
                min(BROWSE_BUDGET, BROWSE_WINDOW - read),
                filter.state or "",
                filter.queue or "",
                filter.task or "",
                filter.text or "",
            ]
            reply = json.loads(self._run("browse", args))
            at, clock = float(reply[0]), reply[0]  # one clock for every call of this page
            rows += [(job_id, codec.pairs(flat)) for job_id, flat in _list(reply[1])]
            moved = (reply[2], reply[3]) != (at_text, after_id)
            if len(rows) > limit or reply[4] == "1" or not moved:
                break
            at_text, after_id = reply[2], reply[3]
            read += min(BROWSE_BUDGET, BROWSE_WINDOW - read)
            if read >= BROWSE_WINDOW:
                stopped = True
                break
        jobs = [codec.from_hash(job_id, h, at) for job_id, h in rows[:limit]]
        if len(rows) <= limit:
            return jobs, encode_cursor(float(at_text), after_id) if stopped else None
        last = jobs[-1]
        return jobs, encode_cursor(last.created_at, last.id)

    def dependents(self, job_id: str, limit: int = 100) -> list[Job]:
        reply = json.loads(self._run("dependents", [job_id, int(limit)]))
        at = float(reply[0])
        return [codec.from_hash(child, codec.pairs(flat), at) for child, flat in _list(reply[1])]

    def steps(self, job_id: str) -> dict[str, str]:
        flat = self._conn.call(lambda c: c.hgetall(f"{self.base}:steps:{job_id}"))
        return {str(k): str(v) for k, v in flat.items()}

    def queue_stats(self, now: float | None = None) -> list[QueueStats]:
        reply = json.loads(self._run("queue_stats", [codec.now_arg(now)]))
        out = []
        for name, flat, oldest, paused, past in _list(reply[1]):
            flat = _list(flat)
            counts = {flat[i]: int(flat[i + 1]) for i in range(0, len(flat), 2)}
            due = float(oldest) if oldest else None
            out.append(QueueStats(name, counts, due, paused == "1", past_lease=int(past)))
        return sorted(out, key=lambda s: s.name)

    def finished_series(
        self, since: float, step: float = 60.0, now: float | None = None
    ) -> list[tuple[float, str, int]]:
        check_series(since, step)
        args = [codec.now_arg(now), repr(float(since)), repr(float(step))]
        reply = json.loads(self._run("finished_series", args))
        return sorted((float(b), o, int(n)) for b, o, n in _list(reply))

    def execution_stats(self, bounds: Sequence[float], now: float | None = None) -> list[ExecutionStats]:
        limits = check_bounds(bounds)
        reply = json.loads(self._run("execution_stats", [repr(b) for b in limits]))
        out = [
            ExecutionStats(q, o, int(n), float(total), tuple(int(x) for x in _list(per)))
            for q, o, n, total, per in _list(reply)
        ]
        return sorted(out, key=lambda s: (s.queue, s.outcome))

    def pause(self, queue: str) -> None:
        check_queue(queue)
        self._run("pause", ["1", queue])

    def resume(self, queue: str) -> None:
        check_queue(queue)
        self._run("pause", ["0", queue])

    def paused(self) -> set[str]:
        return {str(q) for q in self._conn.call(lambda c: c.smembers(f"{self.base}:paused"))}

    def delete(self, job_id: str, now: float | None = None) -> bool:
        return self._run("delete", [codec.now_arg(now), job_id], safe=False) == 1

    def beat(self, worker: WorkerBeat, now: float | None = None) -> None:
        beat = {
            "q": list(worker.queues),
            "sl": worker.slots,
            "b": worker.busy,
            "sa": repr(float(worker.started_at)),
        }
        self._run("beat", [codec.now_arg(now), f"{worker.host}\t{worker.pid}", json.dumps(beat)])

    def workers(self, within: float = 15.0, now: float | None = None) -> list[WorkerBeat]:
        reply = json.loads(self._run("workers", [codec.now_arg(now), repr(LOST_FACTOR * within)]))
        at = float(reply[0])
        beats = []
        for key, text in _list(reply[1]):
            host, pid = key.rsplit("\t", 1)
            b = json.loads(text)
            queues = tuple(_list(b["q"]))
            beat = WorkerBeat(
                host, int(pid), queues, int(b["sl"]), int(b["b"]), float(b["sa"]), float(b["n"])
            )
            seen = liveness(beat, within, at)
            if seen is not None:
                beats.append(seen)
        return sorted(beats, key=lambda w: (w.host, w.pid))
