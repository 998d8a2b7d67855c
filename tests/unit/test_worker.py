"""The worker in this process, on the memory store: what it logs per job and how soon it
settles a finished one."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import pytest
import structlog
from support.wait import wait_until
from support.workers import worker_thread

import tinyjobs
from tinyjobs.execution import answer
from tinyjobs.job import Job
from tinyjobs.stop import StopReason
from tinyjobs.stores.base import Claimed
from tinyjobs.stores.memory import MemoryStore
from tinyjobs.worker import Worker


@pytest.fixture
def app():
    app = tinyjobs.App("memory://", clock=tinyjobs.FakeClock())
    yield app
    app.close()


def test_every_job_transition_is_one_event_with_the_jobs_fields(app):
    @app.task
    def ok(run):
        return None

    @app.task(queue="risky", attempts=3)
    def boom(run):
        raise ValueError("boom\nat the end")

    @app.task
    def give_up(run):
        return run.fail("no point")

    @app.task
    def later(run):
        return run.snooze(60)

    jobs = {
        "ok": ok.enqueue(),
        "boom": boom.enqueue(),
        "give_up": give_up.enqueue(),
        "later": later.enqueue(),
    }
    with structlog.testing.capture_logs() as events, worker_thread(app, slots=4):
        wait_until(lambda: len([e for e in events if e["event"] != "job.started" and "job_id" in e]) >= 4)
    by_job: dict[str, list[dict]] = {}
    for event in events:
        if "job_id" in event:
            by_job.setdefault(event["job_id"], []).append(event)
    expected_end = {
        "ok": ("job.done", "info", {"seconds"}),
        "boom": ("job.retrying", "warning", {"delay", "error"}),
        "give_up": ("job.failed", "error", {"error"}),
        "later": ("job.snoozed", "info", {"delay"}),
    }
    for name, job in jobs.items():
        started, ended = by_job[job.id]
        fields = {"job_id": job.id, "task": name, "queue": job.queue, "attempt": 1}
        assert started == {**fields, "pid": started["pid"], "event": "job.started", "log_level": "info"}
        event, level, extra = expected_end[name]
        assert {k: ended[k] for k in fields} == fields
        assert (ended["event"], ended["log_level"]) == (event, level)
        assert set(ended) - set(fields) == {"pid", "event", "log_level"} | extra
    assert by_job[jobs["boom"].id][1]["error"] == "at the end"
    assert by_job[jobs["give_up"].id][1]["error"] == "no point"


def test_a_finished_job_is_settled_at_once_not_at_the_next_idle_poll(app):
    """One slot, so each job is claimed only when the one before is settled: were the loop not
    woken by a finished job, each would wait out the idle poll (0.25 s)."""

    @app.task
    def quick(run, n):
        return n

    jobs = quick.enqueue_many({"n": n} for n in range(8))
    began = time.monotonic()
    with worker_thread(app, slots=1):
        wait_until(lambda: all(app.get(job.id).state == "done" for job in jobs), interval=0.005)
        elapsed = time.monotonic() - began
    assert [app.get(job.id).result for job in jobs] == list(range(8))
    assert elapsed < 1.0, f"8 jobs one after another took {elapsed:.2f} s"


class PollingStore(MemoryStore):
    """A memory store whose `wait` polls, as SQLite's does: it counts the calls, and sets
    `watched_while_full` at the second call that starts while `full()` says every slot is taken
    (one may start in the instant the last slot fills, after the watcher looked)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0
        self.full: Callable[[], bool] = lambda: False
        self.calls_while_full = 0
        self.watched_while_full = threading.Event()

    def wait(self, queues, timeout):
        self.waits += 1
        if self.full():
            self.calls_while_full += 1
            if self.calls_while_full > 1:
                self.watched_while_full.set()
        time.sleep(0.001)  # the cost of one poll
        return True


def test_the_store_is_not_watched_while_every_slot_is_taken():
    """A full worker claims as its jobs finish; watching the store for new jobs then is waste."""
    store = PollingStore()
    app = tinyjobs.App(store)
    release = threading.Event()

    @app.task
    def hold(run):
        release.wait(10)

    hold.enqueue_many([{}, {}])
    with worker_thread(app, slots=2) as worker:
        store.full = lambda: len(worker.running) == 2
        wait_until(lambda: len(worker.running) == 2)
        # The watch polls every millisecond when it runs: 0.3 s of it would be ~300 calls.
        watched = store.watched_while_full.wait(0.3)
        during = store.calls_while_full
        release.set()
        wait_until(lambda: not worker.running)
        before = store.waits
        wait_until(lambda: store.waits - before >= 10, timeout=5, what="the watch to resume")
    assert not watched and during <= 1, f"the store was watched {during} times while the worker was full"


def test_a_none_result_is_stored_as_json_null_and_others_as_their_json():
    claimed = Claimed(Job("j1", "t", "q", {}, "running", attempts=1), "token", 60.0)
    assert answer(claimed, None).settlement.result == "null"
    assert answer(claimed, {"a": [1, None]}).settlement.result == '{"a":[1,null]}'
    refused = answer(claimed, object())
    assert refused.settlement.outcome == "fail" and refused.settlement.error.startswith("SerializationError")
    assert refused.verdict == "failed"


class DoorbellStore(MemoryStore):
    """A memory store whose `wait` returns only for an enqueue (as SQLite's doorbell, Redis's
    wake lists and PostgreSQL's NOTIFY do; the memory store's wakes at any write), and which
    records the thread of every claim and settle."""

    def __init__(self) -> None:
        super().__init__()
        self.bell = threading.Condition()
        self.rings = self.heard = 0
        self.calls: list[tuple[str, str]] = []
        self._depth = threading.local()

    def enqueue(self, jobs, now=None, conn=None):
        made = super().enqueue(jobs, now, conn)
        with self.bell:
            self.rings += 1
            self.bell.notify_all()
        return made

    def wait(self, queues, timeout):
        with self.bell:
            rang = self.bell.wait_for(lambda: self.rings != self.heard, timeout)
            self.heard = self.rings
            return rang

    def _record(self, what: str) -> None:
        if not self.inside:  # settle_and_claim's own settle and claim are not calls of their own
            self.calls.append((what, threading.current_thread().name))

    @property
    def inside(self) -> bool:
        return getattr(self._depth, "n", 0) > 0

    def claim(self, *args, **kwargs):
        self._record("claim")
        return super().claim(*args, **kwargs)

    def settle(self, *args, **kwargs):
        self._record("settle")
        return super().settle(*args, **kwargs)

    def settle_and_claim(self, *args, **kwargs):
        self._record("settle_and_claim")
        self._depth.n = 1
        try:
            return super().settle_and_claim(*args, **kwargs)
        finally:
            self._depth.n = 0


def test_a_lone_job_is_claimed_run_and_settled_by_one_slot_thread_while_the_loop_sleeps(monkeypatch):
    """At a low rate each job arrives alone: the store watcher hands the claim to the first
    slot thread, which runs the job it claimed and settles it, all on its own store connection;
    the loop's thread is not woken for either (one hop each way, which cost more CPU per job
    than the job's store calls). Observed by the threads the store calls come from, so the
    hop coming back fails this test, however fast it is."""
    import tinyjobs.worker as worker_module

    monkeypatch.setattr(worker_module, "IDLE_POLL", 60.0)  # no claim by the clock meanwhile
    monkeypatch.setattr(worker_module, "TIMED_POLL", 60.0)
    store = DoorbellStore()
    app = tinyjobs.App(store)
    app.queue("default", lease="10m")  # no lease renewal falls due before the loop's idle poll
    ran_on: list[str] = []

    @app.task
    def where(run, n):
        ran_on.append(threading.current_thread().name)
        return n

    # The reaper's duties fall due in 30 s: before the idle poll, so the loop sleeps until then,
    # and a helper that took that time for earlier than the loop's own wake-up would wake it.
    monkeypatch.setattr("tinyjobs.reaper.HOLDER_INTERVAL", 30.0)
    monkeypatch.setattr("tinyjobs.reaper.PURGE_INTERVAL", 30.0)
    worker = worker_module.Worker(app, slots=4, handle_signals=False)
    assert worker.reaper is not None
    worker.reaper.reap_interval = 30.0
    turns = []
    turn = worker._work_a_turn
    worker._work_a_turn = lambda: turns.append(1) or turn()  # type: ignore[method-assign]
    loop = threading.Thread(target=worker.run, name="the-loop", daemon=True)
    loop.start()
    try:
        # The loop's first turn is over and it sleeps (it releases its role to sleep).
        wait_until(lambda: worker._loop_wake_at > 0 and not worker._role.locked())
        store.calls.clear()
        turns.clear()
        for n in range(3):
            job = where.enqueue(n=n)
            wait_until(lambda: app.get(job.id).state == "done", interval=0.005)  # noqa: B023
        assert ran_on == ["tinyjobs-slot-0"] * 3
        assert store.calls == [("claim", "tinyjobs-slot-0"), ("settle_and_claim", "tinyjobs-slot-0")] * 3
        assert turns == [], "the loop was woken for a lone job"
    finally:
        worker.request_stop()
        loop.join(10)
        app.close()
    assert not loop.is_alive()


class BurstStore(DoorbellStore):
    """A store whose wait returns at once `burst` times once armed (a wait that keeps
    reporting news, as PostgreSQL's did with a passed due time), and whose claims take a few
    milliseconds (a store round trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.burst = 0
        self.claims = 0

    def wait(self, queues, timeout):
        if self.burst > 0:
            self.burst -= 1
            return True
        return super().wait(queues, timeout)

    def claim(self, *args, **kwargs):
        self.claims += 1
        time.sleep(0.005)
        return super().claim(*args, **kwargs)


def test_a_burst_of_news_queues_one_claim_at_a_time_not_a_pile_ahead_of_the_next_job(monkeypatch):
    """Each piece of news has the first slot claim (an errand queued on it); news while an
    errand waits to begin is that errand's, whose claim comes after it. Queued once per piece
    of news, 300 at once queued 300 claims, and the job claimed by the first of them started
    only after the other 299 (a job 0.5-0.8 s late at 50 jobs/s on PostgreSQL)."""
    import tinyjobs.worker as worker_module

    monkeypatch.setattr(worker_module, "IDLE_POLL", 60.0)
    monkeypatch.setattr(worker_module, "TIMED_POLL", 60.0)
    store = BurstStore()
    app = tinyjobs.App(store)

    @app.task
    def noop(run):
        return None

    worker = worker_module.Worker(app, slots=2, handle_signals=False)
    loop = threading.Thread(target=worker.run, name="the-loop", daemon=True)
    loop.start()
    try:
        wait_until(lambda: worker._loop_wake_at > 0 and not worker._role.locked())
        store.claims = 0
        store.burst = 300
        with store.bell:  # ends the watcher's wait now, so the burst begins
            store.rings += 1
            store.bell.notify_all()
        wait_until(lambda: store.burst == 0)
        job = noop.enqueue()
        wait_until(lambda: app.get(job.id).state == "done", timeout=10)
        assert store.claims < 60, f"{store.claims} claims for a burst of 300 waits"
    finally:
        worker.request_stop()
        loop.join(10)
        app.close()
    assert not loop.is_alive()


def test_a_worker_whose_parents_pipe_lost_its_reader_stops_as_orphaned(app):
    # The supervisor's death closes the read end of the worker's report pipe before the kernel
    # hands the worker to another parent: the worker leaves on the first, whatever getppid()
    # still says (here it never changes: the "parent" is this test's own parent).
    read_end, write_end = os.pipe()
    worker = Worker(app, slots=1, handle_signals=False, parent_pid=os.getppid(), parent_fd=write_end)
    outcome: list[StopReason] = []
    thread = threading.Thread(target=lambda: outcome.append(worker.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: worker._loop_ident is not None, timeout=10, what="the loop to run")
        assert thread.is_alive()
        os.close(read_end)
        thread.join(30)
        assert outcome == [StopReason.ORPHANED]
    finally:
        worker.request_hard_stop()
        thread.join(10)
        os.close(write_end)
