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
from collections.abc import Iterator
from contextlib import contextmanager

ROUND_TRIP = 15.0
CONNECT = 5.0

_RETRY_AT_MOST: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "tinyjobs_retry_at_most", default=None
)


@contextmanager
def retrying_at_most(seconds: float) -> Iterator[None]:
    """Within this block (this thread or task), a store retries a failed call for at most
    `seconds` before it raises StoreUnavailable."""
    token = _RETRY_AT_MOST.set(max(0.0, seconds))
    try:
        yield
    finally:
        _RETRY_AT_MOST.reset(token)


def retry_window(default: float) -> float:
    """How long a store keeps retrying a call here: `default`, or less inside
    `retrying_at_most`."""
    limit = _RETRY_AT_MOST.get()
    return default if limit is None else min(default, limit)
