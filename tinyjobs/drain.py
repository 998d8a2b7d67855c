"""`app.drain()`: run due jobs in this thread, for tests of one's own tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .execution import prepare, run_async, run_sync
from .holder import Holder
from .stores.base import Claimed, Settlement

if TYPE_CHECKING:
    from .app import App

MAX_RUNS = 100_000  # a job that snoozes for zero seconds must not hang a test forever


def drain(app: App, queues: Iterable[str] | None = None) -> int:
    """Claim and run due jobs one at a time until none is due; return how many ran.

    Expired leases are reaped first, so a test can move its clock past a lease and drain.
    Timeouts of sync handlers are not enforced here (no thread to abandon)."""
    store, policies, holder = app.store, app.policies(queues), Holder.current()
    store.reap(app.now())
    ran = 0
    while ran < MAX_RUNS:
        claimed = store.claim(policies, holder, 1, app.now())
        if not claimed:
            return ran
        settlement = run_one(app, claimed[0])
        if settlement is not None:
            store.settle([settlement], app.now())
        ran += 1
    return ran


def run_one(app: App, claimed: Claimed) -> Settlement | None:
    prepared = prepare(app.tasks, claimed, app.store, app.now)
    if isinstance(prepared, Settlement):
        return prepared
    if prepared[0].is_async:
        return asyncio.run(run_async(prepared, claimed, app.timeout_for(prepared[0])))
    return run_sync(prepared, claimed)
