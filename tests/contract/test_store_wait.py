"""`wait` on stores with the "timed" capability: it returns by the time the earliest scheduled
job of its queues falls due, with nothing else happening (workers rely on it to claim by the
clock only rarely: tinyjobs/worker.py TIMED_POLL)."""

from __future__ import annotations

import time

import pytest
from helpers import add


@pytest.mark.requires("timed")
def test_wait_returns_when_a_scheduled_job_falls_due(store):
    add(store, "later", now=store.now(), delay=1.0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        # The enqueue's own wake-up ends a first wait; a wait that returns True once the job
        # is due (well before its 30 s timeout) is what the capability promises.
        if store.wait(["default"], 30.0) and store.now() >= store.get("later").due_at - 0.05:
            break
    else:
        pytest.fail("wait did not return by the scheduled job's due time")
    assert time.monotonic() < deadline
