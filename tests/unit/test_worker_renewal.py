"""JOB-04 against slow turns: the worker's loop renews its leases every half lease, and a turn
that takes long (a reap or purge on a loaded server, a cron poll, a claim retried within the
store guard's patience) must not push the next renewal a turn's length further out."""

from __future__ import annotations

import threading
import time

from support.wait import wait_until
from support.workers import worker_thread

import tinyjobs
from tinyjobs.worker import Worker

SLOW_TURN = 1.4  # longer than the margin a 2 s lease leaves after its renewal at 1 s


def test_a_slow_turn_does_not_delay_the_next_renewal_past_the_lease():
    app = tinyjobs.App("memory://")  # the store's own (real) clock: leases expire in real time
    app.queue("short", lease="2s")
    store = app.store
    # As the stores whose wait returns when jobs fall due (PostgreSQL, Redis, SQLite): the
    # loop's clock then claims only every TIMED_POLL, and a running job's renewals are the
    # only times it wakes by itself.
    store.capabilities = frozenset({"timed"})
    renewed: list[float] = []
    renew = store.renew

    def recording_renew(tokens, now=None):
        renewed.append(time.monotonic())
        return renew(tokens, now)

    store.renew = recording_renew  # type: ignore[method-assign]
    finished = threading.Event()

    @app.task(queue="short")
    def long_running(run):
        finished.wait(20)

    def slow_turn(worker: Worker) -> None:
        time.sleep(SLOW_TURN)  # every turn of the loop is slow, the renewing ones too

    job = long_running.enqueue()
    try:
        with worker_thread(app, slots=1, on_tick=slow_turn, reaper=False):
            try:
                wait_until(lambda: app.get(job.id).state == "running", what="the job to start")
                started = time.monotonic()
                deadline = started + 5.0  # past two leases' worth of renewals
                while time.monotonic() < deadline:
                    assert store.reap() == 0, f"the lease expired; renewals at {_since(started, renewed)}"
                    time.sleep(0.05)  # polling inside the deadline above, not a fixed wait
            finally:
                finished.set()
            wait_until(lambda: app.get(job.id).state == "done", what="the job to finish")
        assert [e.outcome for e in app.get(job.id).executions] == ["done"]
    finally:
        app.close()
    gaps = [b - a for a, b in zip(renewed, renewed[1:], strict=False)]
    assert len(renewed) >= 3 and max(gaps) < 2.0 - 0.2, f"renewals at {_since(started, renewed)}"


def _since(start: float, times: list[float]) -> list[float]:
    return [round(t - start, 2) for t in times]
