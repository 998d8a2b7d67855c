"""Crash behaviour with real worker processes and real signals (SQLite)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from collections import defaultdict

from support.processes import runs_again_after_worker_lost
from support.wait import wait_until


def test_a_worker_killed_mid_job_loses_nothing_and_the_job_runs_again_as_its_next_attempt(workers, app):
    job = app.enqueue("hold", {"seconds": 60})
    first = workers.start()
    wait_until(
        lambda: any(m["kind"] == "start" for m in workers.marks()),
        timeout=15,
        what="the first attempt to start",
    )
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert app.get(job.id).state == "running"  # nothing has ended the lease yet
    # A new worker on this host sees the holder is gone and ends its lease at once (DUR-02),
    # long before the 3 s lease would run out on its own.
    runs_again_after_worker_lost(workers, app, job.id, first)


def stop_outside_a_write(proc: subprocess.Popen, database: str) -> None:
    """SIGSTOP `proc` at a moment when it holds no write transaction: a process stopped inside
    one (a lease renewal whose COMMIT waits on a slow fsync, say) keeps SQLite's write lock, and
    no other process could write, the reaper included, until it runs again. That is SQLite's
    nature, not what the test is about, so it tries again until the lock is free."""
    for _ in range(50):
        proc.send_signal(signal.SIGSTOP)
        probe = sqlite3.connect(database, timeout=0.5, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:  # stopped holding the lock: let it finish, try again
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        finally:
            probe.close()
    raise AssertionError("the worker held the write lock at every try")


def test_an_expired_lease_comes_back_within_lease_plus_a_second(workers, app):
    job = app.enqueue("hold", {"seconds": 60})
    first = workers.start()
    wait_until(lambda: app.get(job.id).state == "running", timeout=15, what="the job to start")
    stop_outside_a_write(first, app.store.path)  # alive but silent: only the lease can free the job
    try:
        second = workers.start()
        wait_until(
            lambda: app.get(job.id).attempts == 2,
            timeout=3 + 1 + 5,
            what="the reaper to free the job",
        )
        assert app.get(job.id).executions[0].outcome == "lease expired"
        assert second.poll() is None
    finally:
        first.send_signal(signal.SIGCONT)


def test_a_handler_that_kills_its_process_every_time_fails_for_good_at_its_attempts(workers, app):
    job = app.enqueue("crash", {})
    for _ in range(10):  # play the supervisor: restart the worker each time it dies
        proc = workers.start()
        proc.wait(30)
        assert proc.returncode == 13
        if app.get(job.id).attempts >= 3:
            break
    workers.start()  # the last attempt's lease is ended by the next worker on this host
    final = wait_until(
        lambda: (j := app.get(job.id)) and j.state == "failed" and j,
        timeout=15,
        what="the job to fail for good",
    )
    assert final.attempts == 3
    assert [e.outcome for e in final.executions] == ["worker lost"] * 3
    assert "worker lost" in final.error


def test_two_workers_on_one_file_never_run_one_job_twice(workers, app):
    app.enqueue_many([("record", {"n": i}) for i in range(300)])
    workers.start("--slots", "4")
    workers.start("--slots", "4")
    wait_until(
        lambda: app.store.counts().get("default", {}).get("done") == 300,
        timeout=60,
        what="all jobs to finish",
    )
    runs = defaultdict(list)
    for m in workers.marks():
        runs[m["job"]].append(m)
    assert len(runs) == 300
    assert all(len(marks) == 2 for marks in runs.values())  # one start, one end: ran once
    assert len({m["pid"] for marks in runs.values() for m in marks}) == 2  # both took part


def test_sigterm_drains_running_jobs_then_exits_zero(workers, app):
    job = app.enqueue("hold", {"seconds": 1.0})
    proc = workers.start()
    wait_until(lambda: app.get(job.id).state == "running", timeout=15, what="the job to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert app.get(job.id).state == "done"


def test_sigterm_past_the_drain_timeout_hands_the_job_back_uncounted(workers, app):
    job = app.enqueue("hold", {"seconds": 60})
    proc = workers.start("--drain-timeout", "0.5s")
    wait_until(lambda: app.get(job.id).state == "running", timeout=15, what="the job to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    back = app.get(job.id)
    assert back.state == "waiting" and back.attempts == 0
    assert back.executions[0].outcome == "handed back"


def test_a_job_for_a_task_this_worker_does_not_know_is_retried_by_backoff(workers, app):
    job = app.store.enqueue([__import__("tinyjobs").stores.NewJob(id="future", task="not_deployed_yet")])[0]
    workers.start()
    later = wait_until(
        lambda: (j := app.get(job.id)) and j.attempts >= 1 and j.state != "running" and j,
        timeout=15,
        what="the unknown task's attempt to settle",
    )
    assert later.state == "scheduled" and "UnknownTask" in later.error
