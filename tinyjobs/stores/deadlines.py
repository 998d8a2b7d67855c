"""How long a store call may take: the timeouts every store applies, and how a caller that must
stay responsive (a worker's loop, the supervisor's leader) shortens a store's own retrying.

Every store call is bounded (docs/stores.md, "Timeouts"):
- ROUND_TRIP: one request and its answer on PostgreSQL or Redis. A connection that stalls
  (packets stop, nobody resets it) fails after this long instead of hanging the caller: the
  kernel cannot tell a stalled peer from a slow one, so only a deadline of our own can.
- CONNECT: opening a connection (libpq's connect_timeout, redis-py's socket_connect_timeout).
- SQLite waits at most its busy timeout for the write lock (sqlite/connection.py).

A store that reconnects and repeats a call after a dropped connection (PostgreSQL, Redis) keeps
at it for up to its own `retry_for`, so that an application's `enqueue` rides through a quick
restart. A loop that has other duties asks for less with `retrying_at_most(seconds)`: the
store then gives up sooner and the loop backs off by itself (tinyjobs/storeguard.py)."""

from __future__ import annotations

import contextvars

ROUND_TRIP = 15.0
CONNECT = 5.0

_RETRY_AT_MOST: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "tinyjobs_retry_at_most", default=None
)


class retrying_at_most:  # named as the function it was: callers use it as one
    """Within this block (this thread or task), a store retries a failed call for at most
    `seconds` before it raises StoreUnavailable. A class, not a @contextmanager generator: a
    worker enters it around every store call (a generator's frames cost four calls a time)."""

    __slots__ = ("_seconds", "_token")

    def __init__(self, seconds: float) -> None:
        self._seconds = max(0.0, seconds)

    def __enter__(self) -> None:
        self._token = _RETRY_AT_MOST.set(self._seconds)

    def __exit__(self, *exc: object) -> None:
        _RETRY_AT_MOST.reset(self._token)


def retry_window(default: float) -> float:
    """How long a store keeps retrying a call here: `default`, or less inside
    `retrying_at_most`."""
    limit = _RETRY_AT_MOST.get()
    return default if limit is None else min(default, limit)
