"""The SQLite store's "timed" wait: it returns by the time the earliest scheduled job of its
queues falls due (so a worker claims by the clock once a TIMED_POLL, not every IDLE_POLL),
without reading that time at every wake-up token. The contract test (test_store_wait.py)
covers a job scheduled before the wait began; these cover the ways a due time changes while
a thread waits, or between two waits: another process's enqueue (a SCHEDULED token), a retry's
backoff, an enqueue in the caller's own transaction (no token), and the polling fallback."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite import store as store_module
from tinyjobs.stores.sqlite.channels import Channels
from tinyjobs.stores.sqlite.doorbell import WAKE_ENV

QUEUES = {"default": QueuePolicy("default")}
LONG = 30.0  # a wait's timeout: returning well before it means something else ended the wait


@pytest.fixture
def paths(tmp_path):
    return f"sqlite:///{tmp_path}/jobs.db", tmp_path / "jobs.db"


def _wait_in_thread(sq, queues, timeout):
    """Start `sq.wait(queues, timeout)` on a thread of its own; returns (thread, result list,
    the store.now() when it returned)."""
    out: list[tuple[bool, float]] = []

    def run():
        out.append((sq.wait(queues, timeout), sq.now()))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


needs_channels = pytest.mark.skipif(not Channels("/nonexistent").enabled, reason="no epoll here")


@needs_channels
def test_a_job_scheduled_during_a_wait_ends_it_when_due_not_before(paths, monkeypatch):
    """Another process schedules a job while this thread waits: its SCHEDULED token makes the
    waiter read the due time again and go on waiting until then (not return at the token:
    nothing is claimable yet)."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)  # only tokens and due times
    url, _ = paths
    sq, other = open_sqlite(url), open_sqlite(url)
    try:
        assert sq.wait(["default"], 0) is False  # the listener is made, nothing scheduled
        assert sq._wait_state(["default"]).due_at == float("inf")
        started = time.monotonic()
        thread, out = _wait_in_thread(sq, ["default"], LONG)
        time.sleep(0.1)  # the waiter sleeps in epoll by now (a later start only shortens it)
        other.enqueue([NewJob(id="later", task="t", delay=0.5)])
        thread.join(LONG + 5)
        [(woken, when)] = out
        assert woken is True
        assert when >= other.get("later").due_at  # not at the token: at the due time
        assert time.monotonic() - started < LONG / 2  # not at the wait's timeout
    finally:
        other.close()
        sq.close()


@needs_channels
def test_a_retry_with_a_backoff_is_waited_for(paths, monkeypatch):
    """A settlement that leaves its job pending with a delay sends a SCHEDULED token: a waiter
    started after the wake-up for it returns when the retry is due."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)
    url, _ = paths
    sq, worker = open_sqlite(url), open_sqlite(url)
    try:
        assert sq.wait(["default"], 0) is False
        worker.enqueue([NewJob(id="a", task="t")])
        assert sq.wait(["default"], LONG) is True  # the enqueue's token
        [claimed] = worker.claim(QUEUES, Holder.current(), 1)
        settled = Settlement(claimed.job.id, claimed.token, "retry", error="x", delay=0.5)
        assert worker.settle([settled]) == [True]
        started = time.monotonic()
        deadline = started + LONG
        # The retry's TOKEN (pending again) ends one wait at once; its SCHEDULED token has the
        # due time read again, and a wait returns True once the job is due.
        while time.monotonic() < deadline:
            if sq.wait(["default"], LONG) and sq.now() >= worker.get("a").due_at:
                break
        assert time.monotonic() - started < LONG / 2
    finally:
        worker.close()
        sq.close()


@needs_channels
def test_a_token_does_not_read_the_due_time_and_a_silent_schedule_is_found(paths, monkeypatch):
    """Wake-up tokens never read the due time (no statement per job); a job scheduled in the
    caller's own transaction (no token) is found by the next look at data_version, which reads
    the due time again."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 0.05)
    url, path = paths
    sq, other = open_sqlite(url), open_sqlite(url)
    reads: list[tuple[str, ...]] = []
    read_due = sq._read_due

    def counted(queues):
        reads.append(tuple(queues))
        return read_due(queues)

    monkeypatch.setattr(sq, "_read_due", counted)
    try:
        assert sq.wait(["default"], 0) is False
        assert reads == [("default",)]
        for i in range(3):
            other.enqueue([NewJob(id=f"now{i}", task="t")])
            assert sq.wait(["default"], LONG) is True
        assert len(reads) == 1  # three tokens, no read
        silent = sqlite3.connect(path)
        other.enqueue([NewJob(id="later", task="t", delay=0.5)], conn=silent)
        silent.commit()
        silent.close()
        started = time.monotonic()
        while time.monotonic() - started < LONG:
            if sq.wait(["default"], LONG) and sq.now() >= other.get("later").due_at:
                break
        assert time.monotonic() - started < LONG / 2
        assert len(reads) >= 2
    finally:
        other.close()
        sq.close()


def test_the_fallback_returns_when_a_scheduled_job_falls_due(paths, monkeypatch):
    monkeypatch.setenv(WAKE_ENV, "poll")
    url, _ = paths
    sq, other = open_sqlite(url), open_sqlite(url)
    try:
        assert sq._channels.listen(["default"]) == (None, False)
        assert sq.wait(["default"], 0) is False  # the first look
        other.enqueue([NewJob(id="later", task="t", delay=0.5)])
        assert sq.wait(["default"], LONG) is True  # data_version moved
        started = time.monotonic()
        result = sq.wait(["default"], LONG)
        assert result is True and sq.now() >= other.get("later").due_at
        assert time.monotonic() - started < LONG / 2
    finally:
        other.close()
        sq.close()


def test_the_due_time_is_read_in_a_few_probes_not_a_scan(paths):
    """The plan of until_due: index searches of jobs_claim, never a scan of the jobs."""
    url, _ = paths
    sq = open_sqlite(url)
    try:
        conn = sq._pool.get()
        plan = [
            row[3]
            for row in conn.execute(
                "EXPLAIN QUERY PLAN " + store_module.Q["until_due"], {"queues": '["default"]', "now": 0.0}
            )
        ]
        searches = [step for step in plan if "jobs" in step and "json_each" not in step]
        assert searches and all("SEARCH jobs USING INDEX jobs_claim" in step for step in searches), plan
    finally:
        sq.close()
