"""SUP-06 and SUP-07, JOB-12: hung workers are killed and replaced; workers are recycled past
--max-jobs, --max-memory and after a sync handler overran its timeout."""

from __future__ import annotations

import os
import signal

import supervisor_harness
from supervisor_harness import alive
from support.wait import wait_until

harness, app = supervisor_harness.harness, supervisor_harness.app  # fixtures


def test_sup06_a_worker_that_stops_heart_beating_is_killed_and_replaced(harness, app):
    sup = harness.start("--workers", "1", "--heartbeat-timeout", "1.5s")
    hung = sup.wait_ready(1)[0]
    job = app.enqueue("hold", {"seconds": 60})
    wait_until(lambda: harness.starts(job.id), timeout=15, what="the job to start")
    os.kill(hung, signal.SIGSTOP)  # alive, but silent
    fresh = wait_until(
        lambda: [p for p in sup.running_workers() if p != hung],
        timeout=15,
        what="the hung worker to be replaced",
    )
    wait_until(lambda: not alive(hung), timeout=10, what="the hung worker to be killed")
    assert sup.event("worker.hung")[0]["worker_pid"] == hung
    second = wait_until(lambda: harness.starts(job.id)[1:], timeout=10, what="the job again")
    assert second[0]["pid"] == fresh[0] and second[0]["attempt"] == 2


def test_sup07_a_worker_past_max_jobs_is_recycled_and_no_job_is_lost(harness, app):
    sup = harness.start("--workers", "1", "--slots", "1", "--max-jobs", "3")
    sup.wait_ready(1)
    jobs = app.enqueue_many([("quick", {"n": i}) for i in range(10)])
    wait_until(
        lambda: all(app.get(j.id).state == "done" for j in jobs),
        timeout=30,
        what="every job to finish",
    )
    pids = {m["pid"] for m in harness.starts()}
    assert len(pids) >= 3, "ten jobs at three (plus jitter) per worker need three workers"
    assert all(m["attempt"] == 1 for m in harness.starts())
    reasons = [e["exit"] for e in sup.event("worker.exited")]
    assert reasons and set(reasons) == {"max-jobs"}


def test_sup07_a_worker_past_max_memory_is_recycled_gracefully(harness):
    sup = harness.start("--workers", "1", "--max-memory", "1MB")  # every worker is bigger
    first = sup.wait_ready(1)[0]
    wait_until(lambda: sup.event("worker.max_memory"), timeout=15, what="the memory check")
    wait_until(lambda: first not in sup.running_workers(), timeout=15, what="the recycle")
    exited = wait_until(lambda: sup.event("worker.exited"), timeout=15, what="the exit")
    assert exited[0]["worker_pid"] == first and exited[0]["exit"] == "stopped"
    assert alive(sup.pid)


def test_job12_a_sync_handler_past_its_timeout_gets_its_worker_replaced(harness, app):
    sup = harness.start("--workers", "1", "--drain-timeout", "2s")
    first = sup.wait_ready(1)[0]
    job = app.enqueue("overrun", {"seconds": 30})  # queue timeout 1 s
    wait_until(lambda: harness.starts(job.id), timeout=15, what="the job to start")
    exited = wait_until(lambda: sup.event("worker.exited"), timeout=20, what="the recycle")
    assert exited[0]["worker_pid"] == first and exited[0]["exit"] == "recycle"
    wait_until(lambda: [p for p in sup.running_workers() if p != first], timeout=10, what="a new one")
    record = app.get(job.id)
    assert record.executions[0].outcome == "timeout"
    assert not alive(first), "the timed-out run's process is gone before any new attempt"
