"""`app.drain()`: run due jobs in this thread, for tests of one's own tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from .execution import Ending, prepare
from .holder import Holder
from .runtime import Runtime
from .stores.base import Claimed

MAX_RUNS = 100_000  # a job that snoozes for zero seconds must not hang a test forever


def drain(app: Runtime, queues: Iterable[str] | None = None) -> int:
    """Claim and run due jobs one at a time until none is due; return how many ran.

    Expired leases are reaped first, so a test can move its clock past a lease and drain.
    Timeouts of sync handlers are not enforced here (no thread to abandon)."""
    store, clock = app.store, app.clock
    policies, holder = app.policies(queues), Holder.current()
    store.reap(clock.store_now())
    ran = 0
    while ran < MAX_RUNS:
        claimed = store.claim(policies, holder, 1, clock.store_now())
        if not claimed:
            return ran
        ending = run_one(app, claimed[0])
        if ending is not None:
            store.settle([ending.settlement], clock.store_now())
        ran += 1
    return ran


def run_one(app: Runtime, claimed: Claimed) -> Ending | None:
    """Run one claimed job in this thread (an async handler in its own event loop); its
    Ending, or None when the lease was lost."""
    attempt = prepare(app.tasks, claimed, app.store, app.clock.store_now)
    if isinstance(attempt, Ending):
        return attempt
    if attempt.task.is_async:
        return asyncio.run(attempt.run_async(app.timeout_for(attempt.task)))
    return attempt.run_sync()
