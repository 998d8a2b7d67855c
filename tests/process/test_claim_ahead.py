"""Jobs a worker claims ahead of its free slots (tinyjobs/ahead.py), with real
worker processes and real signals (SQLite): a drain hands them back at once without running
them, a SIGKILL leaves them to the reaper like running jobs, and a long job does not keep them
waiting.

Each test warms a worker of two slots up with short jobs (it claims ahead only after `slots`
short jobs in a row), then enqueues, in one call, two `hold` jobs that take both slots (first:
a higher priority) and two `tick` jobs, which the worker's one claim takes ahead and holds."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from support.processes import WorkerProcesses
from support.wait import wait_until


@pytest.fixture
def app_module() -> str:
    return "aheadapp"  # the workers' and the test's app (conftest.py's fixtures)


def held_behind_two_holds(workers: WorkerProcesses, app) -> tuple[subprocess.Popen, list[str], list[str]]:
    """A worker (two slots) whose two slots run `hold` jobs while it holds two `tick` jobs
    claimed ahead and not started; the worker, the holds' ids and the ticks' ids."""
    worker = workers.start("--slots", "2")
    warm = [j.id for j in app.enqueue_many([("tick", {}) for _ in range(8)])]
    wait_until(lambda: all(app.get(i).state == "done" for i in warm), timeout=20, what="the warm-up")
    holds = [j.id for j in app.enqueue_many([("hold", {"seconds": 60})] * 2 + [("tick", {})] * 2)]
    holds, ticks = holds[:2], holds[2:]  # one priority: claimed in enqueue order, holds first
    wait_until(
        lambda: {m["job"] for m in workers.marks("start")} >= set(holds),
        timeout=15,
        what="both holds to start",
    )
    assert [app.get(i).state for i in ticks] == ["running", "running"], "claimed ahead with the holds"
    assert not {m["job"] for m in workers.marks("start")} & set(ticks), "held, not started"
    return worker, holds, ticks


def given_back(app, ticks: list[str]) -> bool:
    jobs = [app.get(i) for i in ticks]
    return all(j.state == "waiting" and j.attempts == 0 for j in jobs)


def test_a_drain_hands_jobs_claimed_ahead_back_at_once_without_running_them(workers, app):
    workers.env["TJ_TEST_HOLD_FOR"] = "60"  # held until the drain, not handed back for waiting
    worker, holds, ticks = held_behind_two_holds(workers, app)
    worker.send_signal(signal.SIGTERM)
    # At once: the drain waits for the holds (60 s, the drain timeout 30 s), not for these.
    wait_until(lambda: given_back(app, ticks), timeout=5, what="the held ticks to be handed back")
    assert worker.poll() is None, "still draining: the holds run"
    for jid in ticks:
        assert [e.outcome for e in app.get(jid).executions] == ["handed back"]
    assert not {m["job"] for m in workers.marks("start")} & set(ticks), "never run"
    started = {e["job_id"] for e in workers.events("job.started")}
    assert started.isdisjoint(ticks), "job.started only for jobs that started"
    backs = [e for e in workers.events("job.handed_back") if e["job_id"] in ticks]
    assert len(backs) == 2 and all(e["started"] is False for e in backs)
    worker.send_signal(signal.SIGTERM)  # the second signal: hand the holds back too, now
    worker.wait(15)
    assert [app.get(i).state for i in holds] == ["waiting", "waiting"]


def test_jobs_claimed_ahead_by_a_killed_worker_come_back_and_run_as_their_next_attempt(workers, app):
    workers.env["TJ_TEST_HOLD_FOR"] = "60"
    worker, holds, ticks = held_behind_two_holds(workers, app)
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    assert [app.get(i).state for i in ticks] == ["running", "running"]  # only a reaper ends them
    del workers.env["TJ_TEST_HOLD_FOR"]
    workers.start("--slots", "4")  # ends the dead worker's leases as it starts (DUR-02)
    wait_until(lambda: all(app.get(i).state == "done" for i in ticks), timeout=20, what="the ticks to run")
    for jid in ticks:
        job = app.get(jid)
        assert job.attempts == 2  # counted at the claim (JOB-03), as for a running job
        assert [e.outcome for e in job.executions] == ["worker lost", "done"]
        assert [m["attempt"] for m in workers.marks("start") if m["job"] == jid] == [2]


def test_a_long_job_does_not_keep_jobs_claimed_ahead_waiting(workers, app):
    worker, holds, ticks = held_behind_two_holds(workers, app)
    began = time.monotonic()
    # Handed back soon (HOLD_FOR), for another worker to run, although both slots stay busy.
    wait_until(lambda: given_back(app, ticks), timeout=5, what="the held ticks to be handed back")
    assert time.monotonic() - began < 2.0
    assert worker.poll() is None and not {m["job"] for m in workers.marks("start")} & set(ticks)
    workers.start("--slots", "2")
    wait_until(lambda: all(app.get(i).state == "done" for i in ticks), timeout=20, what="the ticks to run")
    assert [app.get(i).state for i in holds] == ["running", "running"]  # the first worker's
