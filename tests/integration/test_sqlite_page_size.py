"""SQLite's file layout (issue 14): a file the store creates has connection.PAGE_SIZE pages, and
rows from a few bytes to many pages long (overflow pages at 1 KiB) go through the whole life of
a job; a file made with SQLite's default 4 KiB pages keeps them and works. And `jobs` of one
state walks migration 6's jobs_state index (the page it returns, not the store), which an
existing file gets when it is opened."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.connection import PAGE_SIZE
from tinyjobs.stores.sqlite.rows import Q

T0 = 1_700_000_000.0
ON = {"default": QueuePolicy("default", lease=30)}
BY = Holder("box/boot", 7, 1)


def _page_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


def _round_trip(store, size: int, n: int) -> None:
    """A job whose payload and result are `size` bytes each: enqueued, claimed, settled, read."""
    payload = json.dumps({"blob": "p" * size})
    result = json.dumps({"blob": "r" * size})
    job_id = f"job-{size}-{n}"
    store.enqueue([NewJob(id=job_id, task="t", payload=payload)], now=T0)
    [claimed] = store.claim(ON, BY, 1, now=T0)
    assert claimed.job.id == job_id and claimed.job.args == {"blob": "p" * size}
    assert store.settle([Settlement(job_id, claimed.token, "done", result=result)], now=T0 + 1) == [True]
    job = store.get(job_id, now=T0 + 2, executions=True)
    assert job is not None and job.state == "done"
    assert job.args == {"blob": "p" * size} and job.result == {"blob": "r" * size}
    assert [(e.attempt, e.outcome) for e in job.executions] == [(1, "done")]


def test_a_new_file_gets_the_page_size(tmp_path):
    path = tmp_path / "jobs.db"
    store = open_sqlite(f"sqlite:///{path}")
    try:
        store.enqueue([NewJob(id="a", task="t")], now=T0)
    finally:
        store.close()
    assert PAGE_SIZE != 4096  # else this test would not tell the setting from SQLite's default
    assert _page_size(path) == PAGE_SIZE


@pytest.mark.parametrize("size", [10, 900, 1100, PAGE_SIZE * 40])
def test_payloads_and_results_of_any_length_round_trip(tmp_path, size):
    store = open_sqlite(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        for n in range(3):
            _round_trip(store, size, n)
        with sqlite3.connect(tmp_path / "jobs.db") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        store.close()


def test_a_file_made_with_4_KiB_pages_keeps_them_and_works(tmp_path):
    path = tmp_path / "jobs.db"
    with sqlite3.connect(path) as conn:  # as an older tinyjobs (or any other tool) made it
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE other (x)")
    store = open_sqlite(f"sqlite:///{path}")
    try:
        for size in (10, 5000):
            _round_trip(store, size, 0)
    finally:
        store.close()
    assert _page_size(path) == 4096


def _fill(store) -> None:
    """Done, failed, waiting, scheduled and running jobs, interleaved in enqueue order."""
    jobs = []
    for n in range(60):
        kind = ("done", "fail", "wait", "sched", "run")[n % 5]
        jobs.append(NewJob(id=f"{kind}-{n:02d}", task="t", delay=86400 if kind == "sched" else 0))
    store.enqueue(jobs, now=T0)
    claimed = {c.job.id: c for c in store.claim(ON, BY, 100, now=T0 + 1)}
    settles = []
    for job_id, c in claimed.items():
        if job_id.startswith("done"):
            settles.append(Settlement(job_id, c.token, "done", result="1"))
        elif job_id.startswith("fail"):
            settles.append(Settlement(job_id, c.token, "fail", error="no"))
        elif job_id.startswith("wait"):
            settles.append(Settlement(job_id, c.token, "handback"))
    store.settle(settles, now=T0 + 2)


@pytest.mark.parametrize(
    ("state", "prefix"),
    [("done", "done"), ("failed", "fail"), ("waiting", "wait"), ("scheduled", "sched"), ("running", "run")],
)
def test_jobs_of_a_state_come_oldest_or_newest_first(tmp_path, state, prefix):
    store = open_sqlite(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        _fill(store)
        expected = [f"{prefix}-{n:02d}" for n in range(60) if _kind(n) == prefix]
        now = T0 + 3
        assert [j.id for j in store.jobs(state, limit=100, now=now)] == expected
        assert [j.id for j in store.jobs(state, limit=5, now=now, newest=True)] == expected[::-1][:5]
        assert [j.id for j in store.jobs(state, limit=3, offset=2, now=now)] == expected[2:5]
        assert store.jobs(state, queue="other", now=now) == []
        assert [j.id for j in store.jobs(state, queue="default", limit=2, now=now)] == expected[:2]
    finally:
        store.close()


def _kind(n: int) -> str:
    return ("done", "fail", "wait", "sched", "run")[n % 5]


@pytest.mark.parametrize("state", ["pending", "done", "failed", "cancelled", "blocked"])
def test_a_page_of_one_state_walks_jobs_state_not_the_table(tmp_path, state):
    store = open_sqlite(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.close()
    statement = Q["jobs_in_state"].format(direction="ASC", state=state, index="jobs_state")
    params = {"queue": None, "split": None, "now": T0, "limit": 10, "offset": 0}
    with sqlite3.connect(tmp_path / "jobs.db") as conn:
        plan = " ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, params))
    assert "USING INDEX jobs_state" in plan and "TEMP B-TREE" not in plan


def test_migration_6_indexes_the_jobs_of_a_file_at_version_5(tmp_path):
    path = tmp_path / "jobs.db"
    first = open_sqlite(f"sqlite:///{path}")
    _fill(first)
    first.close()
    with sqlite3.connect(path, isolation_level=None) as conn:  # back to version 5, as it was
        conn.execute("DELETE FROM schema_version WHERE version >= 6")
        conn.execute("DROP INDEX jobs_state")
    again = open_sqlite(f"sqlite:///{path}")
    try:
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] >= 6
            done = "SELECT count(*) FROM jobs INDEXED BY jobs_state WHERE state = 'done'"
            assert conn.execute(done).fetchone()[0] == 12
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert [j.id for j in again.jobs("done", limit=3, now=T0 + 3)] == ["done-00", "done-05", "done-10"]
    finally:
        again.close()
