"""`/metrics` and `tinyjobs metrics`: the Prometheus text format, computed from the store when
scraped. Nothing is counted in the processes, so a pre-fork pool needs no shared state and any
number of dashboards give the same figures.

Names follow Prometheus practice: the `tinyjobs_` prefix, base units (seconds), `_total` on
counters, labels only from small sets (queue, state, outcome), never a job id. The executions
counter and histogram count what the store still has on record (finished jobs are purged after
their `keep`/`dedupe`), so they can go down; Prometheus reads a decrease as a counter reset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..job import STATES

# Jobs take from milliseconds to an hour: the client libraries' default buckets stop at 10 s.
DURATION_BUCKETS: tuple[float, ...] = (
    0.01,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1800,
    3600,
)
WORKERS_WITHIN = 15.0


def render(store: Any, app_queues: Sequence[str] = (), now: float | None = None) -> str:
    """The metrics text for `store` (queues named by the app appear even with no jobs)."""
    out = _Writer()
    _queues(out, store, app_queues, now)
    _executions(out, store.execution_stats(DURATION_BUCKETS, now=now))
    _workers(out, store.workers(within=WORKERS_WITHIN, now=now))
    return out.text()


def _queues(out: _Writer, store: Any, app_queues: Sequence[str], now: float | None) -> None:
    """Jobs by queue and state, the oldest waiting job's age and the paused flag, per queue."""
    clock = store.now() if now is None else now
    stats = {q.name: q for q in store.queue_stats(now=now)}
    queues = sorted(set(stats) | set(app_queues))

    out.family("tinyjobs_jobs", "gauge", "Jobs on record, by queue and state.")
    for name in queues:
        counts = stats[name].counts if name in stats else {}
        for state in STATES:
            out.sample("tinyjobs_jobs", {"queue": name, "state": state}, counts.get(state, 0))

    out.family(
        "tinyjobs_queue_oldest_waiting_age_seconds",
        "gauge",
        "Age of the oldest due job waiting in the queue (0 when none waits).",
    )
    for name in queues:
        oldest = stats[name].oldest_due_at if name in stats else None
        out.sample(
            "tinyjobs_queue_oldest_waiting_age_seconds",
            {"queue": name},
            0.0 if oldest is None else max(0.0, clock - oldest),
        )

    out.family(
        "tinyjobs_jobs_past_lease",
        "gauge",
        "Running jobs whose lease expired and that no reaper has returned yet (worker gone or stalled).",
    )
    for name in queues:
        out.sample(
            "tinyjobs_jobs_past_lease", {"queue": name}, stats[name].past_lease if name in stats else 0
        )

    out.family("tinyjobs_queue_paused", "gauge", "1 when the queue is paused, else 0.")
    for name in queues:
        out.sample("tinyjobs_queue_paused", {"queue": name}, int(name in stats and stats[name].paused))


def _executions(out: _Writer, executions: Sequence[Any]) -> None:
    """Finished executions by queue and outcome, and their durations as a histogram per queue."""
    out.family(
        "tinyjobs_executions_finished_total",
        "counter",
        "Finished executions still on record, by queue and outcome.",
    )
    for e in sorted(executions, key=lambda e: (e.queue, e.outcome)):
        out.sample("tinyjobs_executions_finished_total", {"queue": e.queue, "outcome": e.outcome}, e.count)

    out.family(
        "tinyjobs_execution_duration_seconds", "histogram", "Duration of finished executions, by queue."
    )
    per_queue: dict[str, tuple[int, float, list[int]]] = {}
    for e in executions:
        count, seconds, buckets = per_queue.get(e.queue, (0, 0.0, [0] * len(DURATION_BUCKETS)))
        per_queue[e.queue] = (
            count + e.count,
            seconds + e.seconds,
            [a + b for a, b in zip(buckets, e.buckets, strict=True)],
        )
    for name in sorted(per_queue):
        count, seconds, buckets = per_queue[name]
        for bound, cumulative in zip(DURATION_BUCKETS, buckets, strict=True):
            out.sample(
                "tinyjobs_execution_duration_seconds_bucket",
                {"queue": name, "le": _number(bound)},
                cumulative,
            )
        out.sample("tinyjobs_execution_duration_seconds_bucket", {"queue": name, "le": "+Inf"}, count)
        out.sample("tinyjobs_execution_duration_seconds_sum", {"queue": name}, seconds)
        out.sample("tinyjobs_execution_duration_seconds_count", {"queue": name}, count)


def _workers(out: _Writer, beats: Sequence[Any]) -> None:
    """Worker processes live and lost, and the live ones' slots, busy and in all."""
    live = [w for w in beats if not w.lost]
    out.family("tinyjobs_workers", "gauge", "Worker processes by state: live, or lost (silent).")
    out.sample("tinyjobs_workers", {"state": "live"}, len(live))
    out.sample("tinyjobs_workers", {"state": "lost"}, len(beats) - len(live))
    out.family("tinyjobs_worker_slots", "gauge", "Job slots of the live workers.")
    out.sample("tinyjobs_worker_slots", {}, sum(w.slots for w in live))
    out.family("tinyjobs_worker_slots_busy", "gauge", "Job slots of the live workers running a job.")
    out.sample("tinyjobs_worker_slots_busy", {}, sum(w.busy for w in live))


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        self.lines.append(f"{name}{{{body}}} {_number(value)}" if body else f"{name} {_number(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
