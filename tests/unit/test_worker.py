"""The worker in this process, on the memory store: what it logs per job and how soon it
settles a finished one."""

from __future__ import annotations

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
from tinyjobs.stores.base import Claimed
from tinyjobs.stores.memory import MemoryStore


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
