"""Clocks. One clock per App answers both questions a component asks of time:

- `now()`: what time it is, as a number (cron's due times, `tinyjobs cron`);
- `store_now()`: the `now` argument of store calls. None lets the store read its own clock
  inside the same atomic step (the process clock for SQLite and memory, the server's for
  PostgreSQL and Redis: CLK-01), at no extra round trip; a test clock gives its time, so
  tests move the store's time with it.

An App without a clock uses a `StoreClock`: real time as the store judges it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


class TimeSource(Protocol):
    """Anything that tells the time: what `App(clock=...)` needs at the least."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...


@runtime_checkable
class Clock(TimeSource, Protocol):
    """The App's clock: the time, and the `now` its store calls take."""

    def store_now(self) -> float | None:
        """The `now` to pass to store calls: None for the store's own clock."""
        ...


def app_clock(given: TimeSource | None, store_time: Callable[[], float]) -> Clock:
    """The App's one clock: the store's time when none is given; a Clock as it is; a source
    that only tells the time moves the store's time too (store calls get its time), as a
    FakeClock does."""
    if given is None:
        return StoreClock(store_time)
    return given if isinstance(given, Clock) else _TimeOnly(given)


class StoreClock:
    """Real time as the store judges it (CLK-01). `now()` asks the store (a round trip on a
    server, so only where a number is needed); store calls get None and read the store's clock
    in their own step."""

    def __init__(self, store_time: Callable[[], float]) -> None:
        self._store_time = store_time  # the store's `now`, looked up when asked: opened lazily

    def now(self) -> float:
        return self._store_time()

    def store_now(self) -> None:
        return None


class SystemClock:
    """The wall clock of this process. Store calls still judge by the store's own clock
    (`store_now()` is None), as CLK-01 requires."""

    def now(self) -> float:
        return time.time()

    def store_now(self) -> None:
        return None


class FakeClock:
    """A clock that only moves when told to: `clock.advance("10m")` or `clock.set(ts)`."""

    def __init__(self, start: float | datetime | None = None) -> None:
        if start is None:
            start = 1_700_000_000.0
        self._now = start.timestamp() if isinstance(start, datetime) else float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def store_now(self) -> float:
        return self.now()

    def advance(self, seconds: float | str) -> float:
        from .durations import parse_duration

        with self._lock:
            self._now += parse_duration(seconds, "advance")
            return self._now

    def set(self, when: float | datetime) -> None:
        with self._lock:
            self._now = when.timestamp() if isinstance(when, datetime) else float(when)


class _TimeOnly:
    """A time source without `store_now`, such as a test's own clock: store calls get its time."""

    def __init__(self, source: TimeSource) -> None:
        self._source = source

    def now(self) -> float:
        return self._source.now()

    def store_now(self) -> float:
        return self._source.now()


def to_datetime(ts: float | None) -> datetime | None:
    """An aware UTC datetime from epoch seconds (None stays None)."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC)
