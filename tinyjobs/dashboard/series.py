"""The finished-per-minute series behind the throughput charts, kept between requests.

Counting a day of executions is the dearest read of the overview (10^6 rows on a busy store).
A minute that has closed does not gain executions later (an execution ends at the store's
`now`), so this process keeps the counts of closed minutes and asks the store only for the
minutes since its last read, plus a margin for writers whose clock runs a little behind
(SQLite's workers stamp with their own clock). Executions purged since stay counted until
their minute leaves the window: the chart shows what finished, not what is still on record."""

from __future__ import annotations

import threading
from collections.abc import Callable

STEP = 60.0
MARGIN = 3 * STEP  # minutes read again every time

Rows = list[tuple[float, str, int]]


class MinuteSeries:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[float, dict[str, int]] = {}  # minute start -> outcome -> n
        self._read_upto: float | None = None  # minutes before this one are cached

    def read(self, fetch: Callable[[float], Rows], since: float, now: float) -> Rows:
        """(minute start, outcome, count) for every minute from `since` (a whole minute) to
        `now`; `fetch(start)` reads the store's per-minute series from `start`."""
        with self._lock:
            start = since
            if self._read_upto is not None and since <= self._read_upto <= now + STEP:
                start = max(since, (self._read_upto - MARGIN) // STEP * STEP)
            fresh = fetch(start)
            self._counts = {t: c for t, c in self._counts.items() if since <= t < start}
            for at, outcome, n in fresh:
                minute = self._counts.setdefault(float(at), {})
                minute[outcome] = minute.get(outcome, 0) + int(n)
            self._read_upto = now // STEP * STEP
            return [(t, o, n) for t, c in sorted(self._counts.items()) for o, n in c.items()]
