"""What the pages and the JSON show, read from the store: one shape for both, so a script that
reads `/api/...` sees exactly what a page shows.

Every job is `Job.to_dict()` (the shape of `tinyjobs job --json`) with its arguments passed
through the redaction hook first. Nothing here knows HTML."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..app import App
from ..job import STATES, Job
from ..stores.base import JobFilter

# fn(task name, arguments) -> the arguments to show; set by the app (`app.redact_args = fn`)
# or given to make_app(redact=...). Secrets in arguments then never reach a page or the JSON.
Redact = Callable[[str, dict[str, Any]], Any]

BULK_LIMIT = 1000  # a bulk action on "all matching" changes at most this many jobs
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
WORKERS_WITHIN = 15.0  # a worker not heard from for this long is shown as lost
HOUR_STEP, DAY_STEP = 60.0, 900.0  # throughput buckets: per minute over an hour, per 15 min over a day


class Source:
    """The dashboard's view of one app and its store."""

    def __init__(self, app: App, redact: Redact | None = None) -> None:
        self.app = app
        self._redact = redact

    @property
    def store(self) -> Any:
        return self.app.store

    def now(self) -> float:
        """Now on the store's clock (or the app's test clock)."""
        now = self.app.clock.store_now()
        return self.store.now() if now is None else now

    # -- jobs -----------------------------------------------------------------------------

    def job_dict(self, job: Job) -> dict[str, Any]:
        data = job.to_dict()
        redact = self._redact or getattr(self.app, "redact_args", None)  # read now: set any time
        if redact is not None:
            data["args"] = redact(job.task, dict(job.args))
        return data

    def browse(
        self, filters: JobFilter, cursor: str | None = None, limit: int = PAGE_SIZE
    ) -> tuple[list[dict[str, Any]], str | None]:
        jobs, next_cursor = self.store.browse(
            filters, cursor=cursor, limit=limit, now=self.app.clock.store_now()
        )
        return [self.job_dict(job) for job in jobs], next_cursor

    def job(self, job_id: str) -> dict[str, Any] | None:
        """One job with its executions, steps, the jobs it waits on and those waiting on it."""
        job = self.app.get(job_id, executions=True)
        if job is None:
            return None
        data = self.job_dict(job)
        data["steps"] = dict(sorted(self.store.steps(job_id).items()))
        waits_on = []
        for dep_id in job.after:
            dep = self.app.get(dep_id, executions=False)
            waits_on.append(
                {"id": dep_id, "task": dep.task if dep else None, "state": dep.state if dep else None}
            )
        data["waits_on"] = waits_on
        data["dependents"] = [
            {"id": d.id, "task": d.task, "state": d.state} for d in self.store.dependents(job_id)
        ]
        return data

    # -- overview -------------------------------------------------------------------------

    def queues(self) -> list[dict[str, Any]]:
        """Every queue with jobs, paused, or named by the app: counts, the age of its oldest
        waiting job, its limits and whether it is paused."""
        now = self.now()
        found = {q.name: q for q in self.store.queue_stats(now=self.app.clock.store_now())}
        names = sorted(set(found) | set(self.app.queues))
        rows = []
        for name in names:
            stats = found.get(name)
            counts = {state: 0 for state in STATES}
            counts.update(stats.counts if stats else {})
            oldest = stats.oldest_due_at if stats else None
            config = self.app.queues.get(name)
            policy = config.policy if config else None
            rows.append(
                {
                    "name": name,
                    "counts": counts,
                    "total": sum(counts.values()),
                    "oldest_due_at": _iso(oldest),
                    "oldest_waiting_age_seconds": None if oldest is None else max(0.0, now - oldest),
                    "paused": bool(stats.paused) if stats else False,
                    # Final-state counts of a very large queue may be estimates (the page says so).
                    "estimated": bool(stats.estimated) if stats else False,
                    "limits": {
                        "concurrency": policy.concurrency if policy else None,
                        "rate": _rate(policy.rate) if policy else None,
                        "group_concurrency": policy.group_concurrency if policy else None,
                        "group_rate": _rate(policy.group_rate) if policy else None,
                        "lease_seconds": policy.lease if policy else None,
                        "timeout_seconds": config.timeout if config else None,
                    },
                }
            )
        return rows

    def throughput(self) -> dict[str, dict[str, Any]]:
        """Finished executions by outcome: per minute over the last hour and per 15 minutes over
        the last day, from one read of the store's series (per minute over the day)."""
        now = self.now()
        since = (now - 86400.0) // DAY_STEP * DAY_STEP + DAY_STEP  # whole 15-min buckets
        rows = self.store.finished_series(since, step=HOUR_STEP, now=self.app.clock.store_now())
        return {
            "hour": _buckets(rows, now - 3600.0, 3600.0, HOUR_STEP),
            "day": _buckets(rows, since, 86400.0, DAY_STEP),
        }

    def stats(self) -> dict[str, Any]:
        queues = self.queues()
        totals = {state: sum(q["counts"].get(state, 0) for q in queues) for state in STATES}
        failures, _ = self.browse(JobFilter(state="failed"), limit=10)
        workers = self.workers()
        return {
            "states": totals,
            "estimated": any(q["estimated"] for q in queues),
            "queues": queues,
            "throughput": self.throughput(),
            "recent_failures": failures,
            "workers": {
                "live": sum(1 for w in workers if not w["lost"]),
                "lost": sum(1 for w in workers if w["lost"]),
                "slots": sum(w["slots"] for w in workers if not w["lost"]),
                "busy": sum(w["busy"] for w in workers if not w["lost"]),
            },
        }

    def workers(self) -> list[dict[str, Any]]:
        beats = self.store.workers(within=WORKERS_WITHIN, now=self.app.clock.store_now())
        return [
            {
                "host": w.host,
                "pid": w.pid,
                "queues": list(w.queues),
                "slots": w.slots,
                "busy": w.busy,
                "started_at": _iso(w.started_at),
                "seen_at": _iso(w.seen_at),
                "lost": w.lost,
            }
            for w in sorted(beats, key=lambda w: (w.lost, w.host, w.pid))
        ]

    def cron(self) -> list[dict[str, Any]]:
        from ..cron import describe

        return describe(self.app, now=self.now())


def _buckets(rows: list[tuple[float, str, int]], start: float, span: float, step: float) -> dict[str, Any]:
    """Per-minute rows summed into `span / step` buckets of `step` seconds from `start` (aligned
    to whole steps): {"step_seconds", "since_at", "buckets": [{"start_at", "counts": {outcome: n}}]}."""
    first = (start // step + 1) * step if start % step else start
    count = int(span // step)
    buckets: list[dict[str, int]] = [{} for _ in range(count)]
    for at, outcome, n in rows:
        index = int((float(at) - first) // step)
        if 0 <= index < count:
            buckets[index][outcome] = buckets[index].get(outcome, 0) + int(n)
    return {
        "step_seconds": step,
        "since_at": _iso(first),
        "buckets": [{"start_at": _iso(first + i * step), "counts": c} for i, c in enumerate(buckets)],
    }


def _rate(rate: tuple[int, float] | None) -> str | None:
    if rate is None:
        return None
    count, period = rate
    return f"{count}/{period:g}s"


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()
