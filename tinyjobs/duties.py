"""A standalone worker's upkeep between its jobs: the reaper (the leases of dead holders and
expired ones, purges) and cron. Under the supervisor its leader does both, and its workers
have none. Any number of processes may do them at once: the store fires each due time once."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .reaper import Reaper
from .runtime import Runtime
from .storeguard import StoreGuard
from .stores.deadlines import retrying_at_most

if TYPE_CHECKING:
    # For the type only: tinyjobs.cron loads croniter, which an app without schedules never needs.
    from .cron import CronScheduler


class Duties:
    """The reaper and the cron scheduler of a worker that has them (`standalone`), run by
    `run()` at the loop's turns through the loop's guard; `due_at` says when next."""

    def __init__(self, app: Runtime, log: Any, guard: StoreGuard, standalone: bool) -> None:
        self._guard = guard
        self.reaper = Reaper(app.store, app.clock.store_now, log, guard=guard) if standalone else None
        self.cron: CronScheduler | None = None
        if standalone and app.crons:
            from .cron import CronScheduler  # loaded already: app.crons came from @app.cron

            self.cron = CronScheduler(app, log)
        self.due_at = 0.0  # monotonic time of the next turn

    def run(self) -> None:
        """The duties that are due, bounded like every store call, and not while the guard
        backs off (during an outage they would only fail, each after a timeout). Sets
        `due_at`, for the loop's sleep."""
        if (self.reaper is None and self.cron is None) or not self._guard.ready():
            return
        started = time.monotonic()
        due_in = float("inf")  # not the idle poll: the clock's claims have their own time
        try:
            with retrying_at_most(self._guard.patience):
                if self.reaper is not None:
                    due_in = min(due_in, self.reaper.tick())
                if self.cron is not None:
                    due_in = min(due_in, self.cron.poll())
        except Exception as err:  # the cron scheduler's clock read: the store is away
            self._guard.failed("cron", err)
        self.due_at = started + due_in
