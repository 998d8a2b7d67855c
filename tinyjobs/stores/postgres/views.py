"""The PostgreSQL store's dashboard operations: browse, stats, series, pause, delete, heartbeats.

A mixin of PostgresStore (it uses the store's `_run`, `_one`, `q`, `schema` and channel). Cost
at 10^6 jobs: browse walks jobs_seq (or jobs_browse_rare for a rare state) newest first and stops
at the page, reading at most WINDOW seqs per call when filtered otherwise; queue_stats
counts every row up to EXACT_ROWS, past that the live states on their partial indexes and a page
sample of the rest; finished_series with whole-minute `since` and `step` reads the counters of
exec_minutes (m005) and executions_ended for the minute that holds `now` (any other window: that
index over the window); execution_stats reads exec_stats. docs/store-contract.md has the
contracts."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from ...job import Job
from ..base import ExecutionStats, JobFilter, QueueStats, WorkerBeat
from ..rules import DELETED
from ..views import (
    LOST_FACTOR,
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
from . import settle
from .rows import NCOLS, to_job
from .sqlfiles import COLUMNS

if TYPE_CHECKING:

    class _Base:
        q: dict[str, str]
        schema: str
        _channel: str

        def _run(self, op: Any, write: bool = True, idempotent: bool = True) -> Any: ...
        def _one(self, name: str, params: dict, write: bool = False) -> Any: ...
else:
    _Base = object

_FILTERS = "/*filters*/"
RARE_STATES = frozenset({"failed", "cancelled", "blocked"})  # those in jobs_browse_rare
EXACT_ROWS = 200_000  # queue_stats counts every job up to this many (about 100 ms)
SAMPLE_ROWS = 20_000  # past it, the final states are estimated from a sample of this many
DENSITY = 20.0  # rows per 8 kB page assumed for a jobs table never analyzed (~400 bytes a row)
# A filtered browse reads at most this many seqs per call (as SQLite's): jobs_seq serves every
# filter but a rare state's, and an index per filter would take an entry at every claim and
# settlement (m009).
WINDOW = 50_000
BEYOND = 2**63 - 1  # above every seq: the first page of an unfiltered browse starts here
SEQ = COLUMNS.index("seq")


class PostgresViews(_Base):
    """See the Store protocol and docs/store-contract.md for each operation's contract."""

    def browse(
        self,
        filter: JobFilter,
        cursor: str | None = None,
        limit: int = 50,
        now: float | None = None,
    ) -> tuple[list[Job], str | None]:
        """Newest first by seq (m009), walking jobs_seq and stopping at the page. With any
        filter but a rare state alone (jobs_browse_rare serves that one), one call reads at
        most WINDOW seqs back from where it starts, and a page that window did not fill comes
        back short (even empty) with a cursor to go on from the window's end."""
        check_browse(filter, limit)
        stored, split = stored_state(filter.state)
        params: dict[str, Any] = {"limit": limit + 1, "now": now, "stored": stored, "split": split}
        where: list[str] = []
        if stored is not None:
            where.append(self.q["browse_rare" if stored in RARE_STATES else "browse_state"])
        if split is not None:
            where.append(self.q["browse_split"])
        for name in ("queue", "task", "text"):
            value = getattr(filter, name)
            if value is not None:
                params[name] = value
                where.append(self.q[f"browse_{name}"])
        served = where == [self.q["browse_rare"]] if stored in RARE_STATES else not where
        after = seq_of(cursor) if cursor else None

        def op(cur: psycopg.Cursor, retrying: bool) -> tuple[list, int | None]:
            floor = None
            params["after"] = after
            if not served:
                ends = cur.execute(self.q["browse_ends"]).fetchone()
                assert ends is not None  # two aggregates: always one row
                first, last = ends
                start = last + 1 if after is None else min(last + 1, after)
                params["after"] = start
                if start - WINDOW > first:  # else the window reaches the oldest job: unbounded
                    floor = params["floor"] = start - WINDOW
            if params["after"] is None:
                params["after"] = BEYOND
            conds = where + ([self.q["browse_window"]] if floor is not None else [])
            text = self.q["browse"].replace(_FILTERS, "".join(f" AND {w}" for w in conds))
            cur.execute(text.encode(), params)
            return cur.fetchall(), floor

        rows, floor = self._run(op, write=False)
        jobs = [to_job(row, row[NCOLS]) for row in rows[:limit]]
        if len(rows) > limit:
            return jobs, seq_cursor(rows[limit - 1][SEQ])
        return jobs, seq_cursor(floor) if floor is not None else None

    def dependents(self, job_id: str, limit: int = 100) -> list[Job]:
        rows = self._one("dependents", {"id": job_id, "limit": limit})
        return [to_job(row, row[NCOLS]) for row in rows]

    def steps(self, job_id: str) -> dict[str, str]:
        return dict(self._one("steps_by_id", {"id": job_id}))

    def queue_stats(self, now: float | None = None) -> list[QueueStats]:
        """Exact counts up to EXACT_ROWS jobs; past that, the live states are counted exactly
        (from their partial indexes) and the final states estimated from a sample of about
        SAMPLE_ROWS rows (`estimated` True)."""
        table = sql.Identifier(self.schema, "jobs").as_string(None)

        def op(cur: psycopg.Cursor, retrying: bool) -> tuple:
            if now is None:  # one clock for every read
                cur.execute(self.q["clock"])
                at = _one(cur)
            else:
                at = now
            cur.execute(self.q["table_rows"], {"table": table, "density": DENSITY})
            rows = _one(cur)
            estimated = rows > EXACT_ROWS
            counts: dict[str, dict[str, int]] = {}
            cur.execute(self.q["live_counts" if estimated else "counts"], {"now": at})
            for queue, state, number in cur.fetchall():
                counts.setdefault(queue, {})[state] = number
            if estimated:
                percent = min(100.0, 100.0 * SAMPLE_ROWS / rows)
                cur.execute(self.q["final_sample"], {"percent": percent})
                for queue, state, number in cur.fetchall():
                    counts.setdefault(queue, {})[state] = round(number * 100.0 / percent)
            cur.execute(self.q["oldest_due"], {"now": at})
            oldest: dict[str, float] = dict(cur.fetchall())
            cur.execute(self.q["past_lease"], {"now": at})
            past: dict[str, int] = dict(cur.fetchall())
            cur.execute(self.q["paused_queues"])
            return counts, oldest, past, {row[0] for row in cur.fetchall()}, estimated

        counts, oldest, past, paused, estimated = self._run(op, write=False)
        return [
            QueueStats(
                name, counts.get(name, {}), oldest.get(name), name in paused, estimated, past.get(name, 0)
            )
            for name in sorted(set(counts) | paused)
        ]

    def finished_series(
        self, since: float, step: float = 60.0, now: float | None = None
    ) -> list[tuple[float, str, int]]:
        """Exact. When `since` and `step` are whole minutes (the dashboard's series) each
        bucket is made of whole minutes: those before the minute that holds `now` come from the
        per-minute counters, the rest from the executions; any other window reads the
        executions it covers."""
        check_series(since, step)
        params = {"since": float(since), "step": float(step), "now": now}
        whole = since % 60 == 0 and step % 60 == 0
        rows = self._one("finished_minutes" if whole else "finished_series", params)
        return [(float(b), o, int(n)) for b, o, n in rows]

    def execution_stats(self, bounds: Sequence[float], now: float | None = None) -> list[ExecutionStats]:
        """From exec_stats: durations rounded up to 1 ms under 1 s, 10 ms under 10 s and 1 s
        beyond (as on SQLite), exact for bounds that are whole numbers of those units."""
        limits = check_bounds(bounds)
        rows = self._one("execution_stats", {})
        per = [(q, o, bisect.bisect_left(limits, upto), n, seconds) for q, o, upto, n, seconds in rows]
        return gather_stats(per, len(limits))

    def pause(self, queue: str) -> None:
        check_queue(queue)
        self._one("pause", {"schema": self.schema, "queue": queue}, write=True)

    def resume(self, queue: str) -> None:
        check_queue(queue)
        self._one("resume", {"queue": queue, "channel": self._channel}, write=True)

    def paused(self) -> set[str]:
        return {row[0] for row in self._one("paused_queues", {})}

    def delete(self, job_id: str, now: float | None = None) -> bool:
        def op(cur: psycopg.Cursor, retrying: bool) -> bool:
            cur.execute(self.q["delete_job"], {"id": job_id})
            row = cur.fetchone()
            if row is None:
                return False
            cur.execute(self.q["forget"], {"ids": [job_id]})
            if row[0] != "done":
                settle.cascade(cur, self.q, now, [job_id], [DELETED])
            return True

        return self._run(op, idempotent=False)

    def beat(self, worker: WorkerBeat, now: float | None = None) -> None:
        params = {
            "host": worker.host,
            "pid": worker.pid,
            "queues": list(worker.queues),
            "slots": worker.slots,
            "busy": worker.busy,
            "started_at": float(worker.started_at),
            "now": now,
        }
        self._one("beat", params, write=True)

    def workers(self, within: float = 15.0, now: float | None = None) -> list[WorkerBeat]:
        rows = self._one("workers", {"now": now})
        if not rows:
            return []
        at = rows[0][-1]
        beats = [WorkerBeat(h, p, tuple(q), s, b, st, seen) for h, p, q, s, b, st, seen, _ in rows]
        shown = [b for b in (liveness(beat, within, at) for beat in beats) if b is not None]
        if len(shown) < len(beats):  # a write only when there is something to drop
            self._one("drop_workers", {"before": at - LOST_FACTOR * within}, write=True)
        return shown


def _one(cur: psycopg.Cursor) -> Any:
    """The single value of a statement that always returns one row."""
    row = cur.fetchone()
    if row is None:
        raise RuntimeError("a statement that always returns one row returned none")
    return row[0]
