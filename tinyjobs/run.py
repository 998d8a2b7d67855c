"""`Run`: what a handler gets besides its arguments, and the answers it can return."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from .durations import check_due, parse_duration, until
from .errors import LeaseLost
from .job import Job
from .serialization import dump, load
from .stores.base import Claimed, Store


@dataclass(frozen=True)
class Outcome:
    """A handler's answer other than a result: returned from `run.retry/snooze/fail`."""

    kind: Literal["retry", "snooze", "fail"]
    delay: float | None = None
    reason: str | None = None


class Run:
    """The attempt a handler runs in: `run.id`, `run.attempt`, `run.job`, `run.due`, and
    `run.step(...)`, `run.retry(...)`, `run.snooze(...)`, `run.fail(...)`.

    In an async handler `run.step` returns an awaitable; everything else is the same."""

    def __init__(
        self,
        claimed: Claimed,
        store: Store,
        now: Callable[[], float | None],
        is_async: bool = False,
    ) -> None:
        self._claimed = claimed
        self._store = store
        self._now = now
        self._steps = dict(claimed.steps)
        self.is_async = is_async

    @property
    def id(self) -> str:
        return self._claimed.job.id

    @property
    def attempt(self) -> int:
        return self._claimed.job.attempts

    @property
    def job(self) -> Job:
        return self._claimed.job

    @property
    def token(self) -> str:
        return self._claimed.token

    @property
    def due(self) -> datetime | None:
        """The job's due time; for a cron job, the due time it fired for."""
        return self._claimed.job.due

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` once per job: its JSON value is kept under the job, and a
        later attempt gets it back without calling `fn` (JOB-06). Raises LeaseLost, writing
        nothing, when this attempt's lease is gone (JOB-05)."""
        if not isinstance(name, str) or not name:
            raise ValueError("step name must be a non-empty string")
        if self.is_async:
            return self._step_async(name, fn, args, kwargs)
        if name in self._steps:
            return load(self._steps[name])
        value = fn(*args, **kwargs)
        self._keep(name, dump(value, f"step {name!r}"))
        return value

    async def _step_async(self, name: str, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        if name in self._steps:
            return load(self._steps[name])
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        text = dump(value, f"step {name!r}")
        import asyncio  # here: `import tinyjobs` alone does not load it (tinyjobs/aio.py says why)

        await asyncio.to_thread(self._keep, name, text)
        return value

    def _keep(self, name: str, text: str) -> None:
        if not self._store.save_step(self.token, name, text, self._now()):
            raise LeaseLost(f"job {self.id} attempt {self.attempt}: lease lost; step {name!r} not kept")
        self._steps[name] = text

    def retry(self, delay: float | str | timedelta | datetime | None = None) -> Outcome:
        """Answer: run again after `delay` (a duration, or an aware datetime to run at; backoff
        when None), counted as an attempt."""
        return Outcome("retry", None if delay is None else _wait(delay, "retry delay"))

    def snooze(self, delay: float | str | timedelta | datetime) -> Outcome:
        """Answer: run again after `delay` (a duration, or an aware datetime to run at), not
        counted as an attempt."""
        return Outcome("snooze", _wait(delay, "snooze delay"))

    def fail(self, reason: str = "failed by the handler") -> Outcome:
        """Answer: fail for good now, with `reason` as the job's error."""
        return Outcome("fail", reason=str(reason))


def _wait(delay: float | str | timedelta | datetime, what: str) -> float:
    """Seconds to wait from a duration or an aware datetime, refused past the latest time
    tinyjobs holds."""
    now = time.time()
    if isinstance(delay, datetime):
        return until(delay, now, what)
    seconds = parse_duration(delay, what)
    check_due(now + seconds, delay, what)
    return seconds
