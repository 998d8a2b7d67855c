"""Running one claimed job to its settlement: the part the worker and `app.drain()` share."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import LeaseLost, SerializationError
from .job import OUTCOME_TIMEOUT, bound_error
from .retry import backoff
from .run import Outcome, Run
from .serialization import dump
from .stores.base import Claimed, Settlement, Store

if TYPE_CHECKING:
    from .task import Task

NULL = dump(None, "result")  # the JSON text of a handler's None result


def prepare(
    tasks: dict[str, Task], claimed: Claimed, store: Store, now: Callable[[], float | None]
) -> tuple[Task, Run, dict[str, Any]] | Settlement:
    """The task, run and arguments for a claimed job, or the settlement that ends it at once:
    an unknown task is retried by backoff (it may be known to a newer or older deploy) and a
    payload that is not JSON fails for good."""
    job = claimed.job
    task = tasks.get(job.task)
    if task is None:
        error = (
            f"UnknownTask: no task named {job.task!r} in this worker's app; retried by backoff "
            "in case another deploy knows it"
        )
        return Settlement(job.id, claimed.token, "retry", error=error, delay=backoff(job.attempts))
    args = job.args
    if not isinstance(args, dict):
        return Settlement(job.id, claimed.token, "fail", error="corrupt payload: not a JSON object")
    return task, Run(claimed, store, now, is_async=task.is_async), args


def answer(claimed: Claimed, value: Any) -> Settlement:
    """The settlement for what a handler returned."""
    job, token = claimed.job, claimed.token
    if isinstance(value, Outcome):
        if value.kind == "snooze":
            return Settlement(job.id, token, "snooze", delay=value.delay or 0.0)
        if value.kind == "fail":
            return Settlement(job.id, token, "fail", error=value.reason)
        delay = backoff(job.attempts) if value.delay is None else value.delay
        return Settlement(job.id, token, "retry", error="retry requested by the handler", delay=delay)
    if value is None:  # most handlers return nothing: skip checking and encoding per job
        return Settlement(job.id, token, "done", result=NULL)
    try:
        return Settlement(job.id, token, "done", result=dump(value, "result"))
    except SerializationError as err:
        return Settlement(job.id, token, "fail", error=f"SerializationError: {err}")


def failure(claimed: Claimed, err: BaseException) -> Settlement | None:
    """The settlement for a raising handler: retry by backoff; None when the lease was lost."""
    if isinstance(err, LeaseLost):
        return None
    text = "".join(traceback.format_exception(err))
    job = claimed.job
    return Settlement(job.id, claimed.token, "retry", error=bound_error(text), delay=backoff(job.attempts))


def timed_out(claimed: Claimed, timeout: float) -> Settlement:
    """The settlement of an attempt that ran past its task's timeout (JOB-12)."""
    job = claimed.job
    error = f"TimeoutError: attempt {job.attempts} ran past the timeout of {timeout:g} s"
    return Settlement(
        job.id,
        claimed.token,
        "retry",
        error=error,
        delay=backoff(job.attempts),
        execution=OUTCOME_TIMEOUT,
    )


def run_sync(prepared: tuple[Task, Run, dict[str, Any]], claimed: Claimed) -> Settlement | None:
    """Call a sync handler and settle by what it did."""
    task, run, args = prepared
    try:
        value = task.fn(run, **args)
    except (Exception, SystemExit) as err:  # every failure of user code is recorded
        return failure(claimed, err)
    return answer(claimed, value)


async def run_async(
    prepared: tuple[Task, Run, dict[str, Any]], claimed: Claimed, timeout: float | None
) -> Settlement | None:
    """Await an async handler, cancelled past `timeout`; settle by what it did."""
    task, run, args = prepared
    try:
        value = await asyncio.wait_for(task.fn(run, **args), timeout)
    except TimeoutError:
        return timed_out(claimed, timeout or 0.0)
    except asyncio.CancelledError:
        raise
    except (Exception, SystemExit) as err:
        return failure(claimed, err)
    return answer(claimed, value)
