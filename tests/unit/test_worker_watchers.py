"""Two store watchers (tinyjobs/storewatch.py, on stores whose wait wakes one waiter per piece
of news): the watcher the news woke runs a lone job itself, with no thread woken for it, while
the other goes on waiting; the last one waiting never runs a job, so news is always heard."""

from __future__ import annotations

import threading

import pytest
from support.wait import wait_until

import tinyjobs
import tinyjobs.worker as worker_module
from tinyjobs.stores.memory import MemoryStore
from tinyjobs.storewatch import watchers_for


class OneWaiterStore(MemoryStore):
    """A memory store whose `wait` returns once per enqueue, to one waiter (as Redis's blocking
    pop and SQLite's FIFO token do), and which records the thread of every claim and settle."""

    def __init__(self) -> None:
        super().__init__()
        self.bell = threading.Condition()
        self.news = 0
        self.calls: list[tuple[str, str]] = []
        self._depth = threading.local()

    def enqueue(self, jobs, now=None, conn=None):
        made = super().enqueue(jobs, now, conn)
        with self.bell:
            self.news += 1
            self.bell.notify()
        return made

    def wait(self, queues, timeout):
        with self.bell:
            if not self.bell.wait_for(lambda: self.news > 0, timeout):
                return False
            self.news -= 1
            return True

    def _record(self, what: str) -> None:
        if getattr(self._depth, "n", 0) == 0:  # settle_and_claim's own parts are not calls
            self.calls.append((what, threading.current_thread().name))

    def claim(self, *args, **kwargs):
        self._record("claim")
        return super().claim(*args, **kwargs)

    def settle(self, *args, **kwargs):
        self._record("settle")
        return super().settle(*args, **kwargs)

    def settle_and_claim(self, *args, **kwargs):
        self._record("settle_and_claim")
        self._depth.n = getattr(self._depth, "n", 0) + 1
        try:
            return super().settle_and_claim(*args, **kwargs)
        finally:
            self._depth.n -= 1


@pytest.fixture
def quiet(monkeypatch):
    """No claim by the clock, no duty, no renewal while the test runs: only news claims."""
    monkeypatch.setattr(worker_module, "IDLE_POLL", 60.0)
    monkeypatch.setattr(worker_module, "TIMED_POLL", 60.0)
    monkeypatch.setattr("tinyjobs.reaper.HOLDER_INTERVAL", 30.0)
    monkeypatch.setattr("tinyjobs.reaper.PURGE_INTERVAL", 30.0)
    monkeypatch.setattr(worker_module, "watchers_for", lambda store: 2)


def start(app, slots=4):
    worker = worker_module.Worker(app, slots=slots, handle_signals=False)
    assert worker.reaper is not None
    worker.reaper.reap_interval = 30.0
    turns: list[int] = []
    turn = worker._work_a_turn
    worker._work_a_turn = lambda: turns.append(1) or turn()  # type: ignore[method-assign]
    loop = threading.Thread(target=worker.run, name="the-loop", daemon=True)
    loop.start()
    # The loop's first turn is over and it sleeps; both watchers wait on the store.
    wait_until(
        lambda: worker._loop_wake_at > 0 and not worker._role.locked() and worker._watcher._waiting == 2
    )
    return worker, loop, turns


def stop(worker, loop, app) -> None:
    worker.request_stop()
    loop.join(10)
    app.close()
    assert not loop.is_alive()


def test_two_watchers_where_the_store_wakes_one_waiter_and_one_elsewhere():
    from tinyjobs.stores.memory.store import MemoryStore
    from tinyjobs.stores.postgres.store import PostgresStore
    from tinyjobs.stores.redis.store import RedisStore
    from tinyjobs.stores.sqlite.store import SQLiteStore

    assert watchers_for(RedisStore) == 2
    assert watchers_for(SQLiteStore) == 2
    assert watchers_for(PostgresStore) == 1  # NOTIFY wakes every waiter
    assert watchers_for(MemoryStore) == 1
    assert watchers_for(object()) == 1


def test_a_lone_job_is_claimed_run_and_settled_by_the_watcher_the_news_woke(quiet):
    """No thread is woken for a lone job: the store watcher that heard of it claims it, runs
    it and settles it (the other watcher waits meanwhile); no slot thread, no loop turn."""
    store = OneWaiterStore()
    app = tinyjobs.App(store)
    app.queue("default", lease="10m")  # no lease renewal falls due meanwhile
    ran_on: list[str] = []

    @app.task
    def where(run, n):
        ran_on.append(threading.current_thread().name)
        return n

    worker, loop, turns = start(app)
    try:
        store.calls.clear()
        turns.clear()
        for n in range(4):
            job = where.enqueue(n=n)
            wait_until(lambda: app.get(job.id).state == "done", interval=0.005)  # noqa: B023
        assert all(name.startswith("tinyjobs-wake") for name in ran_on), ran_on
        assert [what for what, _ in store.calls] == ["claim", "settle_and_claim"] * 4
        assert all(name.startswith("tinyjobs-wake") for _, name in store.calls), store.calls
        assert turns == [], "the loop was woken for a lone job"
    finally:
        stop(worker, loop, app)


def test_news_is_heard_while_a_watcher_runs_a_long_job(quiet):
    """A watcher runs a job only while the other waits on the store: with two long jobs
    running (the first on a watcher, the second handed to a slot by the watcher that was
    left waiting alone), a third job still starts at once."""
    store = OneWaiterStore()
    app = tinyjobs.App(store)
    app.queue("default", lease="10m")
    release = threading.Event()
    started: list[tuple[str, str]] = []

    @app.task
    def long(run):
        started.append(("long", threading.current_thread().name))
        release.wait(30)

    @app.task
    def short(run):
        started.append(("short", threading.current_thread().name))

    worker, loop, _ = start(app)
    try:
        first = long.enqueue()
        wait_until(lambda: len(started) == 1)
        second = long.enqueue()
        wait_until(lambda: len(started) == 2)
        third = short.enqueue()
        wait_until(lambda: app.get(third.id).state == "done", timeout=5)
        assert started[0][1].startswith("tinyjobs-wake")
        assert not started[1][1].startswith("tinyjobs-wake"), started  # the last watcher ran no job
        assert app.get(first.id).state == app.get(second.id).state == "running"
        release.set()
        wait_until(lambda: app.get(first.id).state == app.get(second.id).state == "done")
    finally:
        release.set()
        stop(worker, loop, app)
