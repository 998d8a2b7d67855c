"""Leader duties (SUP-08): one supervisor per store at a time holds the "leader" lease in the
store and runs the reaper every second, cron and the retention purge. Every duty is idempotent,
so correctness never depends on who leads (or on two leading for a moment), only efficiency.

A supervisor that does not lead tries to take the lease once a second; the leader renews it
every third of its TTL (a write, and on SQLite and PostgreSQL a commit, that renewing every
second repeated for nothing: the lease then always has two thirds of its TTL left), and again
at the first tick after a failed call. Each tick's calls also tell the health document whether
the store is reachable. The calls go through a StoreGuard: each is
bounded (the store retries for at most PATIENCE s, so the supervisor's loop is never held long),
an outage is logged once as it starts and once as it ends, and while the store is away the
lease is tried again after a backoff (up to 5 s), not every second."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tinyjobs.reaper import Reaper
from tinyjobs.runtime import Runtime
from tinyjobs.storeguard import StoreGuard
from tinyjobs.stores.deadlines import retrying_at_most
from tinyjobs.urls import mask

if TYPE_CHECKING:
    # For the type only: tinyjobs.cron loads croniter, which an app without schedules never needs.
    from tinyjobs.cron import CronScheduler

LEASE_NAME = "leader"
TICK = 1.0
PATIENCE = 0.3  # one quick reconnect after a dropped connection, no more
BACKOFF = (0.5, 5.0)


class Leader:
    """Runs from the supervisor's main loop through `tick()`; never raises (it reports)."""

    def __init__(self, app: Runtime, holder_id: str, ttl: float, log: Any) -> None:
        self.holder_id, self.ttl, self.log = holder_id, ttl, log
        self.leading = False
        self.reachable: bool | None = None
        self.error: str | None = None
        self.last_cron_tick: float | None = None
        self.guard = StoreGuard(log, patience=PATIENCE, backoff=BACKOFF)
        self._next = 0.0
        self._renew_at = 0.0  # monotonic time the leader renews its lease next
        self.use_app(app)

    def use_app(self, app: Runtime) -> None:
        """Run the duties for `app` from now on (after a reload, the fresh app)."""
        self.app = app
        self.reaper = Reaper(app.store, app.clock.store_now, self.log, reap_interval=TICK, guard=self.guard)
        self.cron = _cron_scheduler(app, self.log)

    def tick(self) -> float:
        """Renew or take the lease when due, then run the due duties if leading; returns
        seconds until the next call is useful."""
        now = time.monotonic()
        if now < self._next:
            return self._next - now
        self._next = now + TICK
        if not self.guard.ready():  # the store is away: the guard's backoff says when to try again
            self.reachable, self.error = self.guard.reachable, self.guard.error
            self._renew_at = 0.0  # the lease may have run out meanwhile: ask at once when back
            return TICK
        if not self.leading or now >= self._renew_at:
            self._renew()
            if self.leading and self.guard.reachable:
                self._renew_at = now + max(TICK, self.ttl / 3)
        if self.leading:
            with retrying_at_most(PATIENCE):
                self.reaper.tick()
                self._tick_cron()
            if not self.guard.reachable:
                self._renew_at = 0.0
            self.reachable, self.error = self.guard.reachable, self.guard.error
        return max(0.0, self._next - time.monotonic())

    def _renew(self) -> None:
        store, now = self.app.store, self.app.clock.store_now()
        leading = bool(self.guard.call("lead", store.lead, LEASE_NAME, self.holder_id, self.ttl, now))
        self.reachable, self.error = self.guard.reachable, self.guard.error
        if leading != self.leading:
            self.log.info("leader.elected" if leading else "leader.lost", holder=self.holder_id)
        self.leading = leading

    def _tick_cron(self) -> None:
        if self.cron is None:
            return
        try:
            self.cron.tick()
        except Exception as err:
            self.log.error("cron.error", error=mask(str(err)))
            return
        self.last_cron_tick = time.time()

    def resign(self) -> None:
        """Give the lease up (at exit), so another supervisor takes over at once."""
        if not self.leading:
            return
        try:
            self.app.store.resign(LEASE_NAME, self.holder_id)
        except Exception as err:
            self.log.warning("leader.resign_failed", error=mask(str(err)))
        self.leading = False

    def health(self) -> dict[str, Any]:
        return {
            "leader": self.leading,
            "last_reap": self.reaper.last_reap,
            "last_cron_tick": self.last_cron_tick,
            "store": {"reachable": self.reachable, "error": self.error, "since": self.guard.lost_at},
        }


def _cron_scheduler(app: Runtime, log: Any) -> CronScheduler | None:
    """A CronScheduler for the app's schedules, or None when it has none. A scheduler that
    cannot start is logged and left out: the reaper and the purge still run."""
    if not app.crons:
        return None
    from tinyjobs.cron import CronScheduler  # loaded already: app.crons came from @app.cron

    try:
        return CronScheduler(app, log)
    except Exception as err:
        log.error("cron.unavailable", error=mask(str(err)))
        return None
