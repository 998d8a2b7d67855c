"""Running one claimed job to its end: the part the worker and `app.drain()` share.

`prepare` turns a claim into an `Attempt` (the handler, its Run, its arguments), or into the
job's `Ending` at once when it cannot run at all. An attempt runs sync or async and returns its
Ending: the settlement for the store and the verdict, what becomes of the job, decided here once
by the rule the stores apply too (a retry on the job's last attempt fails it for good), so that
the worker logs from it instead of deriving it again. One case the stores alone know: a job
whose cancellation was requested while it ran ends cancelled unless it is done.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import LeaseLost, SerializationError
from .job import OUTCOME_TIMEOUT, bound_error
from .retry import backoff
from .run import Outcome, Run
from .serialization import dump
from .stores.base import Claimed, Settlement, Store
from .task import Task

NULL = dump(None, "result")  # the JSON text of a handler's None result

# What an attempt makes of its job; the worker logs `job.<verdict>`.
Verdict = Literal["done", "retrying", "failed", "snoozed", "handed_back"]


# Ending and Attempt are built once per job on the worker's hot path: plain slotted classes,
# as a frozen dataclass's __init__ costs several times more.
@dataclass(slots=True)
class Ending:
    """How an attempt ended: the settlement to apply and the verdict it leads to."""

    settlement: Settlement
    verdict: Verdict


def done(claimed: Claimed, result: str) -> Ending:
    return Ending(Settlement(claimed.job.id, claimed.token, "done", result=result), "done")


def retried(claimed: Claimed, error: str | None, delay: float, execution: str | None = None) -> Ending:
    """A retry: after `delay` seconds, or failed for good when this was the job's last attempt."""
    job = claimed.job
    settlement = Settlement(job.id, claimed.token, "retry", error=error, delay=delay, execution=execution)
    return Ending(settlement, "failed" if job.attempts >= job.max_attempts else "retrying")


def failed(claimed: Claimed, error: str | None) -> Ending:
    return Ending(Settlement(claimed.job.id, claimed.token, "fail", error=error), "failed")


def snoozed(claimed: Claimed, delay: float) -> Ending:
    return Ending(Settlement(claimed.job.id, claimed.token, "snooze", delay=delay), "snoozed")


def handed_back(claimed: Claimed) -> Ending:
    """A drain gives the job back: due again at once, the attempt not counted."""
    return Ending(Settlement(claimed.job.id, claimed.token, "handback"), "handed_back")


def cancelled_while_running(claimed: Claimed) -> Ending:
    """An async handler cancelled because its job's cancellation was requested or its lease
    lost: recorded as a retry, which the store turns into `cancelled` when it was requested."""
    return retried(claimed, "cancelled while running", 0.0)


def timed_out(claimed: Claimed, timeout: float) -> Ending:
    """An attempt that ran past its task's timeout (JOB-12): retried by backoff."""
    job = claimed.job
    error = f"TimeoutError: attempt {job.attempts} ran past the timeout of {timeout:g} s"
    return retried(claimed, error, backoff(job.attempts), execution=OUTCOME_TIMEOUT)


@dataclass(slots=True)
class Attempt:
    """A claimed job ready to run: its task, the Run its handler gets, and its arguments."""

    claimed: Claimed
    task: Task
    run: Run
    args: dict[str, Any]

    def run_sync(self) -> Ending | None:
        """Call a sync handler; its Ending, or None when the lease was lost."""
        try:
            value = self.task.fn(self.run, **self.args)
        except (Exception, SystemExit) as err:  # every failure of user code is recorded
            return self._raised(err)
        return answer(self.claimed, value)

    async def run_async(self, timeout: float | None) -> Ending | None:
        """Await an async handler, cancelled past `timeout`; its Ending, or None when the
        lease was lost. A cancellation from outside propagates."""
        import asyncio  # here: `import tinyjobs` alone does not load it (tinyjobs/aio.py says why)

        try:
            value = await asyncio.wait_for(self.task.fn(self.run, **self.args), timeout)
        except TimeoutError:
            return timed_out(self.claimed, timeout or 0.0)
        except asyncio.CancelledError:
            raise
        except (Exception, SystemExit) as err:
            return self._raised(err)
        return answer(self.claimed, value)

    def _raised(self, err: BaseException) -> Ending | None:
        """A raising handler is retried by backoff, except when the arguments cannot bind to
        its signature: retrying cannot fix those, so the job fails for good at once. A lost
        lease ends nothing (None): the attempt no longer owns the job."""
        if isinstance(err, LeaseLost):
            return None
        if isinstance(err, TypeError):
            mismatch = argument_mismatch(self.task, self.args)
            if mismatch is not None:
                return failed(self.claimed, mismatch)
        job = self.claimed.job
        text = "".join(traceback.format_exception(err))
        return retried(self.claimed, bound_error(text), backoff(job.attempts))


def argument_mismatch(task: Task, args: dict[str, Any]) -> str | None:
    """Why `args` cannot be the handler's keyword arguments (each missing and unexpected one,
    as enqueue words it), or None when they fit or the signature cannot be read. Asked only
    after the call raised TypeError, so jobs whose arguments fit pay nothing for it."""
    problems = task.argument_problems(args)
    if not problems:
        return None
    return (
        f"ArgumentError: {task.describe_handler()} cannot take the job's arguments: "
        f"{'; '.join(problems)}; failed at once, as a retry cannot change them"
    )


def prepare(
    tasks: Mapping[str, Task], claimed: Claimed, store: Store, now: Callable[[], float | None]
) -> Attempt | Ending:
    """The attempt for a claimed job, or its Ending at once: an unknown task is retried by
    backoff (it may be known to a newer or older deploy) and a payload that is not a JSON
    object fails for good. `now` is the clock's `store_now`, for the Run's store writes."""
    job = claimed.job
    task = tasks.get(job.task)
    if task is None:
        error = (
            f"UnknownTask: no task named {job.task!r} in this worker's app; retried by backoff "
            "in case another deploy knows it"
        )
        return retried(claimed, error, backoff(job.attempts))
    args = job.args
    if not isinstance(args, dict):
        return failed(claimed, "corrupt payload: not a JSON object")
    return Attempt(claimed, task, Run(claimed, store, now, is_async=task.is_async), args)


def answer(claimed: Claimed, value: Any) -> Ending:
    """The Ending for what a handler returned."""
    if isinstance(value, Outcome):
        if value.kind == "snooze":
            return snoozed(claimed, value.delay or 0.0)
        if value.kind == "fail":
            return failed(claimed, value.reason)
        delay = backoff(claimed.job.attempts) if value.delay is None else value.delay
        return retried(claimed, "retry requested by the handler", delay)
    if value is None:  # most handlers return nothing: skip checking and encoding per job
        return done(claimed, NULL)
    try:
        return done(claimed, dump(value, "result"))
    except SerializationError as err:
        return failed(claimed, f"SerializationError: {err}")
