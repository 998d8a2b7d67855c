"""The page size of the SQLite store's file: a file the store creates gets PAGE_SIZE pages; a
file made before (4 KiB pages, SQLite's default) keeps its own and works as before; rows longer
than a page (overflow pages) round-trip."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.connection import PAGE_SIZE

QUEUES = {"default": QueuePolicy("default")}


def _page_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


def _run_one(path: Path, payload: str, result: str) -> None:
    """Enqueue, claim and settle one job on the file; then its payload, result and execution
    read back as written."""
    store = open_sqlite(f"sqlite:///{path}")
    try:
        store.enqueue([NewJob(id="big", task="t", payload=payload)])
        [claimed] = store.claim(QUEUES, Holder.current(), 1)
        assert claimed.job.args == json.loads(payload)
        settlement = Settlement(job_id="big", token=claimed.token, outcome="done", result=result)
        assert store.settle([settlement]) == [True]
        job = store.get("big", executions=True)
        assert job is not None and job.state == "done"
        assert job.args == json.loads(payload) and job.result == json.loads(result)
        assert [e.outcome for e in job.executions] == ["done"]
    finally:
        store.close()


def test_a_new_file_gets_the_store_page_size(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    open_sqlite(f"sqlite:///{path}").close()
    assert PAGE_SIZE != 4096  # else this test tells nothing
    assert _page_size(path) == PAGE_SIZE


@pytest.mark.parametrize("size", [10, 3 * PAGE_SIZE, 40 * PAGE_SIZE])
def test_payloads_and_results_of_any_length_round_trip(tmp_path: Path, size: int) -> None:
    # Longer than a page: the row spills into overflow pages.
    _run_one(tmp_path / "jobs.db", json.dumps({"pad": "p" * size}), json.dumps("r" * size))
    assert _page_size(tmp_path / "jobs.db") == PAGE_SIZE


def test_a_file_made_with_other_pages_keeps_them_and_works(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # as a file made before: SQLite's 4 KiB pages, WAL
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE mine (x)")  # the file is no longer empty
    conn.close()
    _run_one(path, json.dumps({"pad": "p" * 5000}), json.dumps(1))
    assert _page_size(path) == 4096
