"""The Job snapshot that the store returns and the user sees, and its executions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .clock import to_datetime

# Stored states. A pending job is reported as `scheduled` while its due time is ahead and as
# `waiting` once it is due; `blocked` waits for the jobs it runs after (DEP-01).
SCHEDULED = "scheduled"
WAITING = "waiting"
BLOCKED = "blocked"
RUNNING = "running"
DONE = "done"
FAILED = "failed"
CANCELLED = "cancelled"  # on record only when the system cancelled it or it was cancelled running

STATES = (SCHEDULED, WAITING, BLOCKED, RUNNING, DONE, FAILED, CANCELLED)
FINAL_STATES = frozenset({DONE, FAILED, CANCELLED})
LIVE_STATES = frozenset({SCHEDULED, WAITING, BLOCKED, RUNNING})

# Outcomes of an execution (one attempt).
OUTCOME_DONE = "done"
OUTCOME_ERROR = "error"  # raised, or run.retry(): retried by backoff or failed at the limit
OUTCOME_FAILED = "failed"  # run.fail(reason)
OUTCOME_SNOOZED = "snoozed"
OUTCOME_TIMEOUT = "timeout"
OUTCOME_HANDED_BACK = "handed back"  # a drain gave it back, uncounted
OUTCOME_WORKER_LOST = "worker lost"  # its process died (DUR-02)
OUTCOME_LEASE_EXPIRED = "lease expired"  # no renewal came (JOB-04)
OUTCOME_CANCELLED = "cancelled"

MAX_ERROR_CHARS = 16_000


def bound_error(text: str | None) -> str | None:
    """An error text cut to MAX_ERROR_CHARS, keeping its head and its tail (the raise site)."""
    if text is None or len(text) <= MAX_ERROR_CHARS:
        return text
    half = MAX_ERROR_CHARS // 2
    return text[:half] + f"\n... [{len(text) - MAX_ERROR_CHARS} characters cut] ...\n" + text[-half:]


def last_line(text: str | None) -> str | None:
    """The last non-blank line of an error text, stripped: of a traceback, the exception and
    its message, which is what a one-line log event shows. Empty or blank text stays as it is."""
    if not text:
        return text
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text


@dataclass(frozen=True)
class Execution:
    """One attempt of a job: who ran it, when, and how it ended (`outcome` None while running)."""

    attempt: int
    host: str
    pid: int
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None
    error: str | None = None

    @property
    def started(self) -> datetime | None:
        return to_datetime(self.started_at)

    @property
    def ended(self) -> datetime | None:
        return to_datetime(self.ended_at)


@dataclass
class Job:
    """A snapshot of a job. Times are epoch seconds (`*_at`), with datetime properties beside."""

    id: str
    task: str
    queue: str
    args: dict[str, Any]
    state: str
    priority: int = 0
    attempts: int = 0
    max_attempts: int = 20
    due_at: float = 0.0
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    result: Any = None
    key: str | None = None
    group: str | None = None
    after: tuple[str, ...] = ()
    ahead: int | None = None
    created: bool = True
    cancel_requested: bool = False
    executions: list[Execution] = field(default_factory=list)

    @property
    def due(self) -> datetime | None:
        return to_datetime(self.due_at)

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view for `--json` output and logs (docs/cli.md shows its shape). Every
        time is an ISO 8601 string (UTC) under a key ending in `_at`, or None; `created`
        (whether an enqueue added the job) is not here: only `enqueue --json` knows it."""
        return {
            "id": self.id,
            "task": self.task,
            "queue": self.queue,
            "state": self.state,
            "args": self.args,
            "priority": self.priority,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "due_at": _iso(self.due_at),
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "error": self.error,
            "result": self.result,
            "key": self.key,
            "group": self.group,
            "after": list(self.after),
            "ahead": self.ahead,
            "cancel_requested": self.cancel_requested,
            "executions": [
                {
                    "attempt": e.attempt,
                    "host": e.host,
                    "pid": e.pid,
                    "started_at": _iso(e.started_at),
                    "ended_at": _iso(e.ended_at),
                    "outcome": e.outcome,
                    "error": e.error,
                }
                for e in self.executions
            ],
        }


def _iso(ts: float | None) -> str | None:
    value = to_datetime(ts)
    return None if value is None else value.isoformat()
