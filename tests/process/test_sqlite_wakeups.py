"""SQLite wake-ups across processes: a waiter in one process wakes for a job enqueued by
another, through the wake-up channels (channels.py) and through the polling fallback; each job
wakes one of two waiting processes, not both; a waiter killed with SIGKILL takes no wake-up
with it; and a real idle `tinyjobs worker` takes a job another process enqueued, in both modes."""

from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.wait import wait_until

from tinyjobs.stores.base import NewJob
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.channels import Channels, channel_path
from tinyjobs.stores.sqlite.doorbell import WAKE_ENV

# The waiter: a first look (so that a change from then on counts), "ready", its mode, pid and
# what the first look returned, then waits, printing "woke" for each wait that a wake-up
# ended, until one ends with the file argv[2] present ("stop"). With the channels, the
# data_version safety tick is pushed past every wait, so only a token can end one before its
# timeout: these tests prove the tokens, not the tick.
WAITER = """
import os, sys, time
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite import store as module
module.SAFETY_TICK = 3600.0
store = open_sqlite(sys.argv[1])
first = store.wait(["default"], 0)
listener, _ = store._channels.listen(["default"])
print("ready", "channel" if listener is not None else "poll", os.getpid(), first, flush=True)
while True:
    started = time.monotonic()
    woke = store.wait(["default"], 120.0)
    if woke and os.path.exists(sys.argv[2]):
        print("stop", flush=True)
        break
    print("woke" if woke else "timeout", round(time.monotonic() - started, 3), flush=True)
"""

has_channels = Channels("/nonexistent", None).enabled


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    """One line of the child's stdout, failing the test if none comes within `timeout`."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no line from the child within {timeout} s"
    return proc.stdout.readline().decode().strip()


def start_waiter(url: str, stop: Path, mode: str = "auto") -> subprocess.Popen:
    env = {**os.environ, WAKE_ENV: mode}
    proc = subprocess.Popen([sys.executable, "-c", WAITER, url, str(stop)], env=env, stdout=subprocess.PIPE)
    expected = "poll" if mode == "poll" else "channel"
    assert read_line(proc, 30).split()[:2] == ["ready", expected]
    return proc


def next_line(procs: list[subprocess.Popen], timeout: float) -> tuple[subprocess.Popen, str]:
    """The next line any of `procs` prints, and which printed it."""
    outs = {p.stdout: p for p in procs if p.stdout is not None}
    ready, _, _ = select.select(list(outs), [], [], timeout)
    assert ready, f"no line from the waiters within {timeout} s"
    proc = outs[ready[0]]
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().strip()


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("channel", marks=pytest.mark.skipif(not has_channels, reason="no epoll here")),
        "poll",
    ],
)
def test_a_waiter_in_another_process_wakes_for_an_enqueue(tmp_path, mode):
    url = f"sqlite:///{tmp_path}/jobs.db"
    store = open_sqlite(url)
    waiter = start_waiter(url, tmp_path / "stop", "poll" if mode == "poll" else "auto")
    try:
        store.enqueue([NewJob(id="wake-me", task="t")])
        # Well inside the waiter's own 120 s timeout: only a wake-up answers this soon.
        assert read_line(waiter, 60).split()[0] == "woke"
    finally:
        stop_all([waiter])
        store.close()


@pytest.mark.skipif(not has_channels, reason="no epoll here")
def test_each_job_wakes_one_of_two_waiting_processes(tmp_path):
    """Ten jobs one after the other, each once the previous one's wake-up was seen: ten
    wake-ups in all. Were every waiter on the host woken for each job (the herd, as with the
    inotify doorbell before), the other process would wake too, within microseconds: 19 or 20.
    At the end each waiter is sent one token with the stop file present, and leaves."""
    url = f"sqlite:///{tmp_path}/jobs.db"
    stop = tmp_path / "stop"
    store = open_sqlite(url)
    waiters = [start_waiter(url, stop) for _ in range(2)]
    woke = 0
    try:
        for n in range(1, 11):
            store.enqueue([NewJob(id=f"job-{n}", task="t")])
            while woke < n:
                _, line = next_line(waiters, 30)
                assert line.split()[0] == "woke", line
                woke += 1
        stop.touch()
        left = list(waiters)
        while left:
            store._channels.wake(["default"])  # one token: one waiter reads "stop" and leaves
            proc, line = next_line(left, 30)
            if line.split()[0] == "woke":
                woke += 1  # a wake-up of the herd, printed late
                continue
            assert line == "stop"
            assert proc.wait(30) == 0
            left.remove(proc)
        assert woke == 10
    finally:
        stop_all(waiters)
        store.close()


@pytest.mark.skipif(not has_channels, reason="no epoll here")
def test_a_waiter_killed_with_sigkill_takes_no_wake_up_with_it(tmp_path):
    """The waiter that gets the tokens is killed with SIGKILL while it waits: the next job
    wakes the other one. Then both are gone, a job is enqueued while nobody waits, and a new
    waiter finds it at its first wait. The channel is a FIFO that holds nothing on disk."""
    url = f"sqlite:///{tmp_path}/jobs.db"
    stop = tmp_path / "stop"
    store = open_sqlite(url)
    waiters = [start_waiter(url, stop) for _ in range(2)]
    try:
        store.enqueue([NewJob(id="first", task="t")])
        first, line = next_line(waiters, 30)
        assert line.split()[0] == "woke"
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(30) == -signal.SIGKILL
        [other] = [p for p in waiters if p is not first]
        store.enqueue([NewJob(id="second", task="t")])
        # Well inside its 120 s wait (and with its safety tick turned off): the token.
        assert read_line(other, 60).split()[0] == "woke"
        other.kill()
        other.wait(30)
        store.enqueue([NewJob(id="third", task="t")])  # nobody waits now
        late = subprocess.Popen(
            [sys.executable, "-c", WAITER, url, str(stop)], stdout=subprocess.PIPE, env=dict(os.environ)
        )
        waiters.append(late)
        # Its first look sets the data_version baseline (after "third" committed), so only the
        # token left in the channel can make it return True.
        assert read_line(late, 30).split() == ["ready", "channel", str(late.pid), "True"]
        path = channel_path(store.path, "default")
        assert stat.S_ISFIFO(os.stat(path).st_mode) and os.stat(path).st_size == 0
    finally:
        stop_all(waiters)
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
