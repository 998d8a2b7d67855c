"""SQLite wake-ups across processes: a waiter in one process wakes for a job enqueued by
another, through the doorbell (inotify) and through the polling fallback; and a real idle
`tinyjobs worker` takes a job another process enqueues, in both modes."""

from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest
from support.wait import wait_until

from tinyjobs.stores.base import NewJob
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.doorbell import WAKE_ENV, Doorbell

# The waiter: a first look (so that a change from then on counts), "ready", then one long wait
# whose result it prints. With the doorbell, the data_version safety tick is pushed past the
# wait, so only a ring can wake it before its timeout: the test proves the bell, not the tick.
WAITER = """
import sys, time
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite import store as module
module.SAFETY_TICK = 3600.0
store = open_sqlite(sys.argv[1])
store.wait(["default"], 0)
watch, _ = store._bell.watch()
print("ready", "bell" if watch is not None else "poll", flush=True)
started = time.monotonic()
woke = store.wait(["default"], 120.0)
print("woke" if woke else "timeout", round(time.monotonic() - started, 3), flush=True)
"""

has_inotify = Doorbell("/nonexistent", None).enabled


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    """One line of the child's stdout, failing the test if none comes within `timeout`."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no line from the child within {timeout} s"
    return proc.stdout.readline().decode().strip()


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("bell", marks=pytest.mark.skipif(not has_inotify, reason="no inotify here")),
        "poll",
    ],
)
def test_a_waiter_in_another_process_wakes_for_an_enqueue(tmp_path, mode):
    url = f"sqlite:///{tmp_path}/jobs.db"
    store = open_sqlite(url)
    env = {**os.environ, WAKE_ENV: "poll" if mode == "poll" else "auto"}
    waiter = subprocess.Popen([sys.executable, "-c", WAITER, url], env=env, stdout=subprocess.PIPE)
    try:
        assert read_line(waiter, 30).split() == ["ready", mode]
        store.enqueue([NewJob(id="wake-me", task="t")])
        # Well inside the waiter's own 120 s timeout: only a wake-up answers this soon.
        assert read_line(waiter, 60).split()[0] == "woke"
    finally:
        waiter.kill()
        waiter.wait()
        store.close()


@pytest.mark.parametrize("mode", ["auto", "poll"])
def test_an_idle_worker_takes_a_job_another_process_enqueued(workers, app, mode):
    workers.env[WAKE_ENV] = mode
    proc = workers.start()
    first = app.enqueue("record", {"n": 1})
    wait_until(lambda: app.get(first.id).state == "done", timeout=30, what="the first job")
    job = app.enqueue("record", {"n": 2})  # to a worker that has nothing to do
    wait_until(lambda: app.get(job.id).state == "done", timeout=30, what="the job enqueued while idle")
    assert proc.poll() is None
