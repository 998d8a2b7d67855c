"""SUP-03 and SUP-05: SIGHUP replaces workers one by one with fresh code and drops no job; a
SIGKILLed supervisor's workers leave within about a second, and the next supervisor on the
host ends the leases of those that could not hand back."""

from __future__ import annotations

import os
import signal
import time

import supervisor_harness
from supervisor_harness import alive
from support.wait import wait_until

harness, app = supervisor_harness.harness, supervisor_harness.app  # fixtures


def test_sup03_sighup_replaces_workers_one_by_one_with_fresh_code_and_drops_no_job(harness, app):
    sup = harness.start("--workers", "2", "--slots", "2")
    old = set(sup.wait_ready(2))
    held = app.enqueue("hold", {"seconds": 2})  # in an old worker across the reload
    wait_until(lambda: harness.starts(held.id), timeout=15, what="the held job to start")
    before = app.enqueue_many([("quick", {"n": i}) for i in range(20)])
    (harness.dir / "version").write_text("2")
    sup.signal(signal.SIGHUP)
    after = app.enqueue_many([("quick", {"n": i}) for i in range(20, 40)])
    new = wait_until(
        lambda: (pids := set(sup.running_workers())) and len(pids) == 2 and not pids & old and pids,
        timeout=30,
        what="both workers replaced",
    )
    jobs = [held, *before, *after]
    wait_until(lambda: all(app.get(j.id).state == "done" for j in jobs), timeout=30, what="every job done")
    assert all(len(harness.starts(j.id)) == 1 for j in jobs), "no job ran twice or was dropped"
    ends = [m for m in harness.marks() if m["kind"] == "end" and m["job"] == held.id]
    assert ends[0]["pid"] in old, "the old worker finished its job before leaving"
    fresh = [m for m in harness.starts() if m["pid"] in new]
    assert fresh and {m["version"] for m in fresh} == {"2"}, "new workers run the new code"
    spawned = [e["worker_pid"] for e in sup.event("worker.spawned")]
    exited = [e["worker_pid"] for e in sup.event("worker.exited")]
    assert len(spawned) == 4 and set(exited) == old
    assert sup.event("supervisor.reloaded")


def test_sup03_a_reload_whose_code_does_not_import_keeps_the_running_workers(harness):
    sup = harness.start("--workers", "1")
    pids = sup.wait_ready(1)
    (harness.dir / "broken").write_text("yes")
    sup.signal(signal.SIGHUP)
    failed = wait_until(lambda: sup.event("supervisor.reload_failed"), timeout=10, what="refusal")
    assert "cannot import" in failed[0]["error"]
    assert sup.running_workers() == pids and alive(sup.pid)


def test_sup05_workers_of_a_killed_supervisor_leave_and_the_next_one_ends_their_leases(harness, app):
    sup = harness.start("--workers", "2", "--slots", "1")
    workers = sup.wait_ready(2)
    job = app.enqueue("hold", {"seconds": 60})  # lease 30 s
    holder = wait_until(lambda: harness.starts(job.id), timeout=15, what="the job to start")[0]
    other = next(p for p in workers if p != holder["pid"])
    # The host loses both at once: the supervisor cannot end the lease, the worker cannot
    # hand the job back (the supervisor is stopped first so that it cannot react).
    os.kill(sup.pid, signal.SIGSTOP)
    os.kill(holder["pid"], signal.SIGKILL)
    os.kill(sup.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(lambda: not alive(other), timeout=5, what="the orphaned worker to leave")
    assert time.monotonic() - killed_at < 3, "orphans notice within about a second"
    wait_until(lambda: not alive(holder["pid"]), timeout=5, what="the killed worker to be gone")
    assert app.get(job.id).state == "running"  # its lease still looks alive

    restarted_at = time.monotonic()
    nxt = harness.start("--workers", "1", name="next")
    again = wait_until(lambda: harness.starts(job.id)[1:], timeout=20, what="the job to run again")
    assert time.monotonic() - restarted_at < 15, "long before the 30 s lease"
    assert again[0]["attempt"] == 2
    assert app.get(job.id).executions[0].outcome == "worker lost"
    assert nxt.event("supervisor.store_ready")[0]["leases_ended"] == 1
