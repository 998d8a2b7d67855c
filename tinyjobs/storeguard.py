"""Store calls from a loop that must keep going while the store is away: a worker, the
supervisor's leader. The store may crash, restart, stall or fill its disk; the loop must not
crash, exit, spin or fill the log.

Contract of `StoreGuard.call`:
- the store retries a failed call for at most `patience` seconds (stores/deadlines.py), so the
  loop is never held longer than that plus one bounded round trip;
- it never raises an Exception: a failed call returns None;
- after a failure the next calls are skipped (None at once) until a backoff has passed,
  doubling from `backoff[0]` to `backoff[1]` with ±20 % jitter (so that many workers do not
  knock on a restarted server in step);
- one log line per change of state: `store.unreachable` when calls start failing (or fail for a new
  reason: another exception type), `store.reachable` with the outage's length once a call works.

`wait_until_reachable` is the same for a process that cannot start without its store."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from . import log as tjlog
from .errors import TinyjobsError
from .stores.deadlines import retrying_at_most
from .urls import mask

T = TypeVar("T")
BACKOFF = (0.1, 5.0)
PATIENCE = 1.0


def describe(err: BaseException) -> str:
    """An error for a log line: tinyjobs' own messages are masked already (masking again would
    read their text as a URL); anything else is masked here."""
    text = str(err).strip() or type(err).__name__
    return text if isinstance(err, TinyjobsError) else mask(text)


class StoreGuard:
    """Wraps the store calls of one loop (one thread). `reachable`, `error` and `lost_at` (epoch
    seconds) describe the store for health reports."""

    def __init__(
        self,
        log: Any,
        *,
        patience: float = PATIENCE,
        backoff: tuple[float, float] = BACKOFF,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.patience, self.backoff, self.clock = log, patience, backoff, clock
        self.reachable = True
        self.error: str | None = None
        self.lost_at: float | None = None
        self.delay = 0.0  # the current backoff; 0 while calls work
        self.retry_at = 0.0
        self._kind: str | None = None
        self._lost_mono = 0.0

    def ready(self) -> bool:
        """True when a call would be made now (no backoff pending)."""
        return self.delay == 0.0 or self.clock() >= self.retry_at

    def call(self, what: str, fn: Callable[..., T], *args: Any) -> T | None:
        """`fn(*args)`, or None when it failed or a backoff is pending (see the module)."""
        if not self.ready():
            return None
        try:
            with retrying_at_most(self.patience):
                result = fn(*args)
        except Exception as err:
            self.failed(what, err)
            return None
        self.succeeded()
        return result

    def failed(self, what: str, err: BaseException) -> None:
        """Record a failed call: back off, and log when the state changed."""
        self.delay = min(self.backoff[1], max(self.backoff[0], self.delay * 2))
        self.retry_at = self.clock() + self.delay * random.uniform(0.8, 1.2)
        kind = type(err).__name__
        self.error = describe(err)
        if self.reachable or kind != self._kind:
            if self.reachable:
                self.lost_at, self._lost_mono = time.time(), self.clock()
            self.log.error("store.unreachable", operation=what, error=self.error, kind=kind)
        self.reachable, self._kind = False, kind

    def succeeded(self) -> None:
        """Record a call that worked: log the end of an outage."""
        if not self.reachable:
            outage = round(self.clock() - self._lost_mono, 3)
            self.log.info("store.reachable", outage_seconds=outage)
        self.reachable, self.error, self.lost_at, self._kind = True, None, None, None
        self.delay = 0.0


def wait_until_reachable(
    probe: Callable[[], T],
    log: Any,
    *,
    backoff: tuple[float, float] = (0.5, 10.0),
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`probe()`'s result once it works, retrying with backoff while it raises a tinyjobs
    StoreError (any other exception propagates: a bad URL does not get better by waiting).
    Logs `store.unreachable` once and `store.reachable` once."""
    from .errors import StoreError

    guard = StoreGuard(log, patience=0.0, backoff=backoff)
    while True:
        try:
            result = probe()
        except StoreError as err:
            guard.failed("open", err)
            tjlog.flush()  # the line must be out before the wait, even when logs are buffered
            sleep(max(0.0, guard.retry_at - guard.clock()))
            continue
        guard.succeeded()
        return result
