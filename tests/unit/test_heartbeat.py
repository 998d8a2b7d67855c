"""Worker heartbeats: a running worker is listed by store.workers() with what it takes; the
heartbeat reports how busy it is and never stops the worker when the store fails."""

from __future__ import annotations

import os

import structlog
from support.wait import wait_until
from support.workers import worker_thread

import tinyjobs
from tinyjobs.heartbeat import Heartbeat
from tinyjobs.holder import Holder
from tinyjobs.stores.memory import MemoryStore


def test_a_running_worker_is_listed_with_its_queues_and_slots():
    app = tinyjobs.App("memory://", clock=tinyjobs.FakeClock())
    try:
        with worker_thread(app, slots=3, queues=["mail", "reports"]):
            wait_until(lambda: app.store.workers(now=app.now()) != [])
            [beat] = app.store.workers(now=app.now())
            assert (beat.pid, beat.queues, beat.slots, beat.busy, beat.lost) == (
                os.getpid(),
                ("mail", "reports"),
                3,
                0,
                False,
            )
            assert beat.host == Holder.current().hostname and beat.seen_at == app.now()
    finally:
        app.close()


def test_heartbeat_beats_when_due_with_the_busy_slots():
    store = MemoryStore()
    times = iter([100.0, 101.0, 102.0, 103.0])
    beat = Heartbeat(store, Holder.current(), ["default"], 8, lambda: next(times), None, every=3600)
    beat.tick(2)
    beat.tick(5)  # not due yet: nothing written
    [seen] = store.workers(now=101.5)
    assert (seen.busy, seen.started_at, seen.seen_at) == (2, 100.0, 101.0)
    beat.every, beat._next = 0.0, 0.0
    beat.tick(4)
    assert store.workers(now=102.5)[0].busy == 4


def test_a_failing_heartbeat_is_logged_and_never_raises():
    store = MemoryStore()
    beat = Heartbeat(store, Holder.current(), ["default"], 1, lambda: None, structlog.get_logger())
    store.close()
    with structlog.testing.capture_logs() as events:
        beat.tick(0)
    assert [e["event"] for e in events] == ["worker.heartbeat_failed"]
