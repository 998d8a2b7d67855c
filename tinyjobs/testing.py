"""Testing code that enqueues, and the tasks themselves, without a server and without sleeping.

    from tinyjobs.testing import swapped
    from myproject.jobs import app, reply      # the app's module fixed its production URL

    def test_reply():
        with swapped(app) as jobs:             # memory:// and a FakeClock, for this test only
            reply.enqueue(message_id=41, delay="10m")
            assert jobs.enqueued(reply)[0].args == {"message_id": 41}
            jobs.advance("10m")
            assert jobs.drain() == 1           # every due job, run now, in this thread
            done = jobs.run(reply, message_id=42)   # one job in-line, with a real Run
            assert done.state == "done" and done.result == {"chars": 42}

With pytest, the plugin (entry point `tinyjobs`) gives the fixture `tinyjobs_swap`: call it
with the app, and the swap ends with the test.

The swap changes the App object in place (its store, its clock, its async twin), so every
task of it and every module that imported it use the memory store; the production store is
never opened. Jobs run by the same code as in a worker (claim, Run, settlement): steps are
kept, `run.retry`, `run.snooze` and `run.fail` and exceptions settle as they would, the
attempt is counted at claim. Timeouts of sync handlers are not enforced in-line (no thread
to abandon); async handlers' are."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .clock import FakeClock
from .drain import drain, run_one
from .errors import ConfigError, JobNotFound
from .holder import Holder
from .job import Job
from .stores.memory import MemoryStore

if TYPE_CHECKING:
    from .app import App
    from .stores.base import Claimed
    from .task import Task

__all__ = ["Swapped", "swapped"]


class _TestStore(MemoryStore):
    """The memory store, plus taking the lease of one chosen job (for `Swapped.run`)."""

    def claim_job(self, job_id: str, app: App, now: float) -> Claimed:
        with self._write():
            row = self._rows.get(job_id)
            if row is None:
                raise JobNotFound(f"job {job_id!r} does not exist")
            if row.state != "pending" or row.due > now:
                raise ConfigError(f"job {job_id!r} is not due (state {row.snapshot(now).state!r})")
            return self._take(row, app.policies([row.queue])[row.queue], Holder.current(), now)


class Swapped:
    """An App on memory:// with a FakeClock, for one test. `clock` moves only when told."""

    def __init__(self, app: App, clock: FakeClock) -> None:
        self.app = app
        self.clock = clock
        self.store = _TestStore()

    def advance(self, duration: float | str) -> float:
        """Move the clock forward (`"10m"`, `90`); the new time in epoch seconds."""
        return self.clock.advance(duration)

    def drain(self, queues: Iterable[str] | None = None) -> int:
        """Run every due job now, in this thread, until none is due; how many ran."""
        return drain(self.app, queues)

    def run(self, task: Task[Any, Any] | str, /, **kwargs: Any) -> Job:
        """Enqueue one job of `task` (arguments and enqueue options as for `enqueue`), run it
        at once in-line with a real Run, and return its snapshot once settled: done with its
        result, waiting or scheduled again after a retry or snooze, failed with its error."""
        name = task if isinstance(task, str) else task.name
        options = {k: kwargs.pop(k) for k in ("id", "key", "group", "priority", "queue") if k in kwargs}
        job = self.app.enqueue(name, kwargs, **options)
        return self.run_job(job.id)

    def run_job(self, job_id: str) -> Job:
        """Run the due job `job_id` now, in-line, and return its snapshot once settled."""
        claimed = self.store.claim_job(job_id, self.app, self.clock.now())
        ending = run_one(self.app, claimed)
        if ending is not None:
            self.store.settle([ending.settlement], self.clock.now())
        found = self.app.get(job_id)
        assert found is not None, f"job {job_id} vanished while it ran"
        return found

    def enqueued(self, task: Task[Any, Any] | str | None = None, state: str | None = None) -> list[Job]:
        """The jobs in the store (of `task`, in `state`, when given), oldest first."""
        name = task if isinstance(task, str) or task is None else task.name
        jobs = self.store.jobs(state=state, limit=1_000_000, now=self.clock.now())
        return [job for job in jobs if name is None or job.task == name]

    def assert_enqueued(self, task: Task[Any, Any] | str, **args: Any) -> Job:
        """The one job of `task` whose arguments include `args`; AssertionError naming what
        was enqueued when there is none or more than one."""
        jobs = self.enqueued(task)
        matching = [job for job in jobs if all(job.args.get(k, _MISSING) == v for k, v in args.items())]
        if len(matching) != 1:
            seen = [job.args for job in jobs]
            raise AssertionError(f"expected one job of {task!s} with {args}, found {len(matching)} in {seen}")
        return matching[0]


_MISSING = object()


@contextmanager
def swapped(app: App, start: float | datetime | None = None) -> Iterator[Swapped]:
    """`app` on a fresh memory:// store and a FakeClock (starting at `start`) inside the
    block; its own store, clock and URL are back afterwards, its production store untouched
    (never opened, if it was not)."""
    saved = (app._store, app.clock, app.url, app._astore)
    clock = FakeClock(start)
    swap = Swapped(app, clock)
    app._store, app.clock, app.url, app._astore = swap.store, clock, swap.store.url, None
    try:
        yield swap
    finally:
        twin = app._astore
        app._store, app.clock, app.url, app._astore = saved
        inner = getattr(twin, "inner", None)
        pool = getattr(inner, "_pool", None)
        if pool is not None:  # the memory twin's threads (tinyjobs.stores.aio.ThreadedStore)
            pool.shutdown(wait=False)
        swap.store.close()
