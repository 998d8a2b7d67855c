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
            wait_until(lambda: app.store.workers(now=app.clock.store_now()) != [])
            [beat] = app.store.workers(now=app.clock.store_now())
            assert (beat.pid, beat.queues, beat.slots, beat.busy, beat.lost) == (
                os.getpid(),
                ("mail", "reports"),
                3,
                0,
                False,
            )
            assert beat.host == Holder.current().hostname and beat.seen_at == app.clock.store_now()
    finally:
        app.close()


def test_heartbeat_beats_with_the_busy_slots_until_stopped():
    store = MemoryStore()
    busy = [2]
    beat = Heartbeat(store, Holder.current(), ["default"], 8, lambda: None, None, every=0.01)
    beat.start(lambda: busy[0])
    try:
        wait_until(lambda: [w.busy for w in store.workers()] == [2])
        busy[0] = 5
        wait_until(lambda: [w.busy for w in store.workers()] == [5])
    finally:
        beat.stop()
    assert not beat._thread.is_alive()


def test_a_failing_heartbeat_is_logged_and_never_raises():
    store = MemoryStore()
    beat = Heartbeat(store, Holder.current(), ["default"], 1, lambda: None, structlog.get_logger())
    store.close()
    with structlog.testing.capture_logs() as events:
        beat.tick(0)
    assert [e["event"] for e in events] == ["worker.heartbeat_failed"]


def test_a_heartbeat_failing_again_and_again_is_logged_once_and_its_return_once():
    class Flaky(MemoryStore):
        down = True

        def beat(self, worker, now=None):
            if self.down:
                raise ConnectionError("store away")
            return super().beat(worker, now)

    store = Flaky()
    beat = Heartbeat(store, Holder.current(), ["default"], 1, lambda: None, structlog.get_logger())
    with structlog.testing.capture_logs() as events:
        for _ in range(3):
            beat.tick(0)
        store.down = False
        beat.tick(0)
        beat.tick(0)
    assert [e["event"] for e in events] == ["worker.heartbeat_failed", "worker.heartbeat_restored"]
    assert [w.busy for w in store.workers()] == [0]
