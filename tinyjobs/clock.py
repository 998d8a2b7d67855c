"""Clocks. Store operations take `now` (epoch seconds) from a clock, so tests can move time.

`None` as `now` means "the store's own clock": the process clock for SQLite and memory, the
server's clock for PostgreSQL and Redis (CLK-01). The App passes `None` with the system clock
and explicit values with a `FakeClock`.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The wall clock of this process."""

    def now(self) -> float:
        return time.time()


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

    def advance(self, seconds: float | str) -> float:
        from .durations import parse_duration

        with self._lock:
            self._now += parse_duration(seconds, "advance")
            return self._now

    def set(self, when: float | datetime) -> None:
        with self._lock:
            self._now = when.timestamp() if isinstance(when, datetime) else float(when)


def to_datetime(ts: float | None) -> datetime | None:
    """An aware UTC datetime from epoch seconds (None stays None)."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC)
