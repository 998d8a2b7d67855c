"""The SQLite file itself changes under a running supervised pool (issue 17, item 4): it is made
read-only (the immutable attribute, `chattr +i`, which not even root may write past: a plain
`chmod a-w` changes nothing for processes that have the file open, and nothing at all for
root), or it is removed.

Read-only: every write fails; enqueue raises a clear error; the workers and the supervisor say
so once each, back off (no busy loop: their CPU is measured), health is degraded with the
reason; once the file is writable again, the work resumes by itself and nothing is lost.

Removed: SQLite keeps the unlinked inode open, so the processes would go on acknowledging jobs
written into a file nobody can see. They refuse instead (a clear error, health degraded), create
no empty file in its place, and use the file that is put back at the path."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import supervisor_harness
from support.wait import wait_until

from tinyjobs.errors import StoreUnavailable
from tinyjobs.stores import open_store
from tinyjobs.stores.base import NewJob

harness = supervisor_harness.harness  # fixture
CPU_WINDOW = 3.0


def _job(job_id: str, task: str = "quick", delay: float = 0.0) -> NewJob:
    args = {"n": 1} if task == "quick" else {"seconds": 0.2}
    return NewJob(job_id, task, payload=json.dumps(args), max_attempts=5, delay=delay)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _chattr(flag: str, *paths: str) -> bool:
    done = subprocess.run(["chattr", flag, *paths], capture_output=True, timeout=10)
    return done.returncode == 0


@pytest.fixture
def immutable_files(harness) -> Iterator[list[str]]:
    """The database and its WAL, to be made immutable by the test; writable again at its end
    whatever happened (else tmp_path could not be removed). Never the -shm: SQLite maps it, and
    a write through a mapping of an immutable file is SIGBUS."""
    db = str(harness.dir / "jobs.db")
    files = [db, db + "-wal"]
    yield files
    _chattr("-i", *[f for f in files if os.path.exists(f)])


def _done(store, ids: list[str]) -> bool:
    return all((job := store.get(i)) is not None and job.state == "done" for i in ids)


@pytest.mark.slow
def test_a_read_only_file_stops_the_work_clearly_without_spinning_and_it_resumes_by_itself(
    harness, immutable_files
):
    sup = harness.start("--workers", "2")
    workers = sorted(sup.wait_ready(2))
    store = open_store(harness.url)
    try:
        store.enqueue([_job("before")])
        wait_until(lambda: _done(store, ["before"]), timeout=20, what="a first job done")
        # Jobs that fall due while the file cannot be written: the workers must try to claim.
        waiting = [f"w{n}" for n in range(10)]
        store.enqueue([_job(i, delay=1.0) for i in waiting])
        if not _chattr("+i", *immutable_files):
            pytest.skip("this filesystem has no immutable attribute (chattr +i)")

        with pytest.raises(StoreUnavailable) as raised:
            store.enqueue([_job("refused")])
        assert "immutable" in str(raised.value) and "jobs.db" in str(raised.value), raised.value

        down = wait_until(
            lambda: (doc := sup.try_health()) and doc["status"] == "degraded" and doc,
            timeout=15,
            what="health to say degraded",
        )
        assert down["healthy"] is False and down["store"]["reachable"] is False
        assert any("store unreachable" in p and "immutable" in p for p in down["problems"]), down
        wait_until(
            lambda: {e["pid"] for e in sup.event("store.unreachable")} >= {sup.pid, *workers},
            timeout=15,
            what="the supervisor and both workers to log store.unreachable",
        )
        # No busy loop: while the file stays read-only, each process backs off (a spinning
        # worker would burn most of a CPU second per second).
        pids = [sup.pid, *workers]
        before = {pid: _cpu_seconds(pid) for pid in pids}
        started = time.monotonic()
        time.sleep(CPU_WINDOW)  # the measuring window itself, not a wait for a state
        elapsed = time.monotonic() - started
        used = {pid: _cpu_seconds(pid) - before[pid] for pid in pids}
        assert all(seconds < 0.1 * elapsed for seconds in used.values()), (used, elapsed)

        assert _chattr("-i", *immutable_files)
        wait_until(lambda: _done(store, waiting), timeout=30, interval=0.1, what="the waiting jobs done")
        store.enqueue([_job("after")])
        wait_until(lambda: _done(store, ["after"]), timeout=20, what="a job enqueued after")
        up = wait_until(
            lambda: (doc := sup.try_health()) and doc["status"] == "healthy" and doc,
            timeout=15,
            what="health to say healthy again",
        )
        assert up["store"]["reachable"] is True and up["problems"] == []
    finally:
        store.close()
    # One line when the file became unwritable, one when it was back, per process.
    lost = sup.event("store.unreachable")
    by_pid = {pid: sum(e["pid"] == pid for e in lost) for pid in [sup.pid, *workers]}
    assert set(by_pid.values()) == {1}, by_pid
    # An idle worker says the store is back at its next store call (a heartbeat, within seconds).
    wait_until(
        lambda: sorted(e["pid"] for e in sup.event("store.reachable")) == sorted(e["pid"] for e in lost),
        timeout=15,
        what="one store.reachable per process that logged store.unreachable",
    )
    assert sorted(sup.running_workers()) == workers and sup.event("worker.exited") == []
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0
    conn = sqlite3.connect(harness.dir / "jobs.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


@pytest.mark.slow
def test_a_removed_file_is_refused_not_written_into_and_a_file_put_back_is_used(harness):
    db = harness.dir / "jobs.db"
    sup = harness.start("--workers", "2")
    workers = sorted(sup.wait_ready(2))
    store = open_store(harness.url)
    try:
        store.enqueue([_job("before")])
        wait_until(lambda: _done(store, ["before"]), timeout=20, what="a first job done")
        for name in ("jobs.db", "jobs.db-wal", "jobs.db-shm"):  # rm jobs.db*
            (harness.dir / name).unlink(missing_ok=True)

        # An application that had the store open is told, instead of being acknowledged a job
        # that would only exist in the deleted inode.
        with pytest.raises(StoreUnavailable) as raised:
            store.enqueue([_job("into-the-void")])
        assert "removed" in str(raised.value) and str(db) in str(raised.value), raised.value

        down = wait_until(
            lambda: (doc := sup.try_health()) and doc["status"] == "degraded" and doc,
            timeout=15,
            what="health to say degraded",
        )
        assert any("removed" in p for p in down["problems"]), down["problems"]
        wait_until(
            lambda: {e["pid"] for e in sup.event("store.unreachable")} >= {sup.pid},
            timeout=15,
            what="the supervisor to log store.unreachable",
        )
        assert not db.exists(), "a process created an empty database in place of the removed one"
    finally:
        store.close()

    # A file is put back (here: a new store; a restored backup is the same to them).
    fresh = open_store(harness.url)
    try:
        fresh.enqueue([_job("after")])
        wait_until(lambda: _done(fresh, ["after"]), timeout=30, what="a job in the file put back done")
        wait_until(
            lambda: (doc := sup.try_health()) and doc["status"] == "healthy" and doc,
            timeout=15,
            what="health to say healthy again",
        )
    finally:
        fresh.close()
    assert sorted(sup.running_workers()) == workers and sup.event("worker.exited") == []
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0
