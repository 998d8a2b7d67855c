"""SUP-01, SUP-02, SUP-04, SUP-10 (titles): the pool of a real `tinyjobs supervise`, with real
signals, on a SQLite file. Every wait has a deadline."""

from __future__ import annotations

import os
import signal
import time

import pytest
import supervisor_harness
from supervisor_harness import alive, title
from support.wait import wait_until

from tinyjobs.supervisor.config import EXIT_BOOT, EXIT_USAGE

harness, app = supervisor_harness.harness, supervisor_harness.app  # fixtures


def test_sup01_sup04_a_killed_worker_is_replaced_and_its_job_runs_again_well_under_the_lease(harness, app):
    sup = harness.start("--workers", "2", "--slots", "1")
    first = sup.wait_ready(2)
    assert title(sup.pid) == "tinyjobs: supervisor"
    job = app.enqueue("hold", {"seconds": 60})  # lease 30 s
    start = wait_until(lambda: harness.starts(job.id), timeout=15, what="the job to start")[0]
    victim = start["pid"]
    wait_until(
        lambda: title(victim) in ("tinyjobs: worker 1 [1/1 jobs]", "tinyjobs: worker 2 [1/1 jobs]"),
        timeout=5,
        what="the worker's title to show its job",
    )

    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    second = wait_until(lambda: harness.starts(job.id)[1:], timeout=15, what="the second attempt")
    assert time.monotonic() - killed_at < 10, "far sooner than the 30 s lease"
    assert second[0]["attempt"] == 2 and second[0]["pid"] != victim
    replaced = wait_until(
        lambda: (pids := sup.running_workers()) and len(pids) == 2 and victim not in pids and pids,
        timeout=10,
        what="a replacement worker",
    )
    assert len(set(replaced) - set(first)) == 1
    again = app.get(job.id)
    assert [e.outcome for e in again.executions] == ["worker lost", None]
    exited = sup.event("worker.exited")
    assert exited and exited[0]["exit"] == "killed by SIGKILL" and exited[0]["leases_ended"] == 1


def test_sup02_sigterm_lets_running_jobs_finish_and_exits_0(harness, app):
    sup = harness.start("--workers", "2", "--drain-timeout", "20s")
    sup.wait_ready(2)
    job = app.enqueue("hold", {"seconds": 1.5})
    wait_until(lambda: harness.starts(job.id), timeout=15, what="the job to start")
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0
    assert app.get(job.id).state == "done"
    assert [m["kind"] for m in harness.marks() if m.get("job") == job.id] == ["start", "end"]


def test_sup02_what_outlives_the_drain_timeout_is_handed_back_uncounted(harness, app):
    sup = harness.start("--workers", "1", "--drain-timeout", "1s")
    sup.wait_ready(1)
    job = app.enqueue("hold", {"seconds": 60})
    wait_until(lambda: harness.starts(job.id), timeout=15, what="the job to start")
    began = time.monotonic()
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0
    assert time.monotonic() - began < 15
    back = app.get(job.id)
    assert back.state in ("waiting", "pending", "scheduled") and back.attempts == 0


@pytest.mark.parametrize("how", ["second SIGTERM", "SIGQUIT", "second SIGINT"])
def test_sup02_a_second_signal_or_sigquit_stops_now(harness, app, how):
    sup = harness.start("--workers", "1", "--drain-timeout", "60s")
    sup.wait_ready(1)
    job = app.enqueue("hold", {"seconds": 60})
    wait_until(lambda: harness.starts(job.id), timeout=15, what="the job to start")
    began = time.monotonic()
    if how == "SIGQUIT":
        sup.signal(signal.SIGQUIT)
    else:
        first = signal.SIGTERM if how == "second SIGTERM" else signal.SIGINT
        sup.signal(first)
        wait_until(lambda: sup.event("supervisor.stopping"), timeout=10, what="the drain")
        sup.signal(first)
    assert sup.wait_exit(20) == 0
    assert time.monotonic() - began < 10, "stopping now does not wait for the 60 s drain"
    back = app.get(job.id)
    assert back.state in ("waiting", "pending", "scheduled") and back.attempts == 0


def test_sup01_an_app_that_does_not_import_is_a_boot_error_not_a_respawn_loop(harness):
    (harness.dir / "broken").write_text("yes")
    sup = harness.start("--workers", "2")
    assert sup.wait_exit(30) == EXIT_BOOT
    assert not sup.event("worker.spawned")
    failed = sup.event("supervisor.boot_failed")
    assert failed and "cannot import 'supapp'" in failed[0]["error"]


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["--drain-timeout", "soon"], EXIT_USAGE, "--drain-timeout"),
        (["--max-memory", "lots"], EXIT_USAGE, "--max-memory"),
        (["--workers", "0"], EXIT_USAGE, "--workers"),
    ],
)
def test_sup01_bad_options_exit_with_a_clear_message(harness, args, code, words):
    sup = harness.start(*args, socket=False)
    assert sup.wait_exit(30) == code
    assert words in sup.log_path.read_text()


def test_a_health_path_that_is_not_a_socket_is_a_boot_error(harness):
    (harness.dir / "sup.sock").write_text("not a socket")
    sup = harness.start("--workers", "1")
    assert sup.wait_exit(30) == EXIT_BOOT
    assert "exists and is not a socket" in sup.log_path.read_text()
    assert not sup.event("worker.spawned")


def test_workers_that_keep_dying_are_respawned_with_backoff(harness, app):
    sup = harness.start("--workers", "1")
    sup.wait_ready(1)
    for _ in range(3):
        pid = sup.wait_ready(1)[0]
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda p=pid: p not in sup.running_workers(), timeout=10, what="the death")
    wait_until(lambda: sup.event("worker.backoff"), timeout=10, what="a backoff")
    sup.wait_ready(1, timeout=20)
    assert alive(sup.pid)
