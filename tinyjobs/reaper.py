"""The reaper: returns expired leases to the queue, ends the leases of dead processes on this
host, and purges finished jobs past retention. Every duty is idempotent, so correctness never
depends on which process runs it or how many do; the supervisor runs it in its leader, a
standalone worker runs it itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .holder import host_id
from .stores.base import Store

REAP_INTERVAL = 1.0  # JOB-04: an expired lease is back within lease + 1 s
HOLDER_INTERVAL = 5.0
PURGE_INTERVAL = 60.0


class Reaper:
    """Runs its duties when `tick()` finds them due; `tick` never raises (it reports)."""

    def __init__(
        self,
        store: Store,
        now: Callable[[], float | None],
        log: Any,
        reap_interval: float = REAP_INTERVAL,
        guard: Any = None,
    ) -> None:
        self.store, self.now, self.log = store, now, log
        self.reap_interval = reap_interval
        # The caller's StoreGuard (tinyjobs/storeguard.py), if any: a failing duty is reported
        # to it (one log line per outage, not one per duty and second), the other duties of
        # that tick are skipped, and no duty runs while its backoff is pending.
        self.guard = guard
        self.last_reap: float | None = None  # wall time of the last successful reap, for health
        self._next = {"reap": 0.0, "holders": 0.0, "purge": 0.0}

    def end_dead_holders(self) -> int:
        """End every lease held by a process of this host that is gone (DUR-02)."""
        gone = [h for h in self.store.holders(host_id()) if h.is_gone()]
        if not gone:
            return 0
        ended = self.store.end_leases(gone, self.now())
        if ended:
            self.log.warning("leases.ended", jobs=ended, holders=[f"{h.hostname}:{h.pid}" for h in gone])
        return ended

    def tick(self) -> float:
        """Run the duties that are due; return seconds until the next one."""
        now = time.monotonic()
        duties: dict[str, tuple[float, Callable[[], Any]]] = {
            "reap": (self.reap_interval, self._reap),
            "holders": (HOLDER_INTERVAL, self.end_dead_holders),
            "purge": (PURGE_INTERVAL, self._purge),
        }
        for name, (interval, duty) in duties.items():
            if self.guard is not None and not self.guard.ready():
                break
            if now >= self._next[name]:
                self._next[name] = now + interval
                try:
                    duty()
                except Exception as err:
                    if self.guard is None:
                        self.log.error("reaper.error", duty=name, error=str(err))
                    else:
                        self.guard.failed(name, err)
        return max(0.0, min(self._next.values()) - time.monotonic())

    def _reap(self) -> None:
        reaped = self.store.reap(self.now())
        self.last_reap = time.time()
        if reaped:
            self.log.warning("leases.expired", jobs=reaped)

    def _purge(self) -> None:
        purged = self.store.purge(self.now())
        if purged:
            self.log.info("jobs.purged", jobs=purged)
