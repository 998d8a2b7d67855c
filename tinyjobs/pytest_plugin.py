"""The pytest plugin (entry point `tinyjobs`): fixtures for testing code that enqueues.

    def test_checkout(tinyjobs_swap):
        jobs = tinyjobs_swap(app)          # app on memory:// with a FakeClock until the test ends
        checkout(order_id=7)
        jobs.assert_enqueued(send_receipt, order_id=7)

See tinyjobs.testing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .app import App
    from .testing import Swapped


@pytest.fixture
def tinyjobs_swap() -> Iterator[Callable[..., Swapped]]:
    """`tinyjobs_swap(app, start=None)`: `app` on memory:// with a FakeClock (from `start`)
    for the rest of the test; returns the `Swapped` handle (drain, run, advance, enqueued)."""
    from .testing import swapped

    with ExitStack() as stack:

        def swap(app: App, start: float | datetime | None = None) -> Swapped:
            return stack.enter_context(swapped(app, start))

        yield swap


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "tinyjobs: tests of tinyjobs tasks (no effect; for selection)")
