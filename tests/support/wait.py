"""Waiting with deadlines instead of fixed sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "condition",
    alive: Callable[[], bool] | None = None,
) -> T:
    """Poll `predicate` until it returns something truthy, and return that; fail with `what`
    after `timeout` s, or at once when `alive()` says that what is awaited has died."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if alive is not None and not alive():
            raise AssertionError(f"{what}: the process exited before it was ready")
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
