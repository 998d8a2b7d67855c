"""What only the SQLite store promises: its URLs, its pragmas, its migrations, enqueue on the
caller's connection (JOB-02), and safety across fork and across processes."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tinyjobs.errors import ConfigError, JobNotFound, StoreUnavailable
from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.sqlite import connection as connection_module
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.connection import load_blocks

QUEUES = {"default": QueuePolicy("default")}


def url_of(path: Path, query: str = "") -> str:
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def store(db_path: Path):
    instance = open_sqlite(url_of(db_path))
    yield instance
    instance.close()


# -- URLs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite:///jobs.db?mode=memory", "in-memory"),
        ("sqlite:///jobs.db?cache=shared", "cache"),
        ("sqlite:///jobs.db?synchronous=off", "synchronous='off'"),
        ("sqlite://somehost/jobs.db", "somehost"),
        ("sqlite://", "names no file"),
    ],
)
def test_bad_urls_are_config_errors_naming_the_culprit(url: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        open_sqlite(url)


def test_url_errors_mask_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        open_sqlite("sqlite://admin:hunter2@host/jobs.db")
    assert "hunter2" not in str(info.value)


def test_relative_and_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_sqlite("sqlite:///rel.db")
    absolute = open_sqlite(f"sqlite:///{tmp_path}/abs.db")  # sqlite:////tmp/...
    try:
        assert relative.path == str(tmp_path / "rel.db")
        assert absolute.path == str(tmp_path / "abs.db")
        assert (tmp_path / "rel.db").exists() and (tmp_path / "abs.db").exists()
    finally:
        relative.close()
        absolute.close()


def test_missing_directory_is_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="does not exist"):
        open_sqlite(url_of(tmp_path / "nowhere" / "jobs.db"))


def test_directory_that_is_a_file_is_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="not a directory"):
        open_sqlite(url_of(tmp_path / "plain" / "jobs.db"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_unwritable_directory_is_store_unavailable(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    with pytest.raises(StoreUnavailable, match="not writable"):
        open_sqlite(url_of(folder / "jobs.db"))


# -- pragmas ---------------------------------------------------------------------------------


def _pragmas(conn: sqlite3.Connection) -> tuple[str, int]:
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return mode, conn.execute("PRAGMA synchronous").fetchone()[0]


def test_every_connection_is_wal_and_synchronous_full(store) -> None:
    store.enqueue([NewJob(id="a", task="t")])
    seen = [_pragmas(store._pool.get()), _pragmas(store._pool.get("wait"))]
    thread = threading.Thread(target=lambda: seen.append(_pragmas(store._pool.get())))
    thread.start()
    thread.join()
    assert seen == [("wal", 2)] * 3  # 2 is FULL


def test_synchronous_normal_when_asked(db_path: Path) -> None:
    store = open_sqlite(url_of(db_path, "synchronous=normal"))
    try:
        assert _pragmas(store._pool.get()) == ("wal", 1)  # 1 is NORMAL
        assert store.synchronous == "NORMAL"
    finally:
        store.close()


# -- migrations ------------------------------------------------------------------------------


def _versions(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM schema_version ORDER BY 1")]


def test_migrations_are_versioned_and_idempotent(db_path: Path) -> None:
    expected = sorted(int(v) for v in load_blocks("schema.sql", "migration"))
    for _ in range(3):
        open_sqlite(url_of(db_path)).close()
    assert _versions(db_path) == expected


def _open_and_close(url: str) -> None:
    open_sqlite(url).close()


def test_processes_opening_a_new_file_at_once_migrate_it_once(db_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_open_and_close, args=(url_of(db_path),)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * 4
    assert _versions(db_path) == sorted(int(v) for v in load_blocks("schema.sql", "migration"))


def test_reopening_keeps_jobs(db_path: Path) -> None:
    store = open_sqlite(url_of(db_path))
    store.enqueue([NewJob(id="kept", task="t", payload='{"n": 1}')])
    store.close()
    store = open_sqlite(url_of(db_path))
    try:
        job = store.get("kept")
        assert job is not None and job.args == {"n": 1} and job.state == "waiting"
    finally:
        store.close()


# -- JOB-02: the caller's transaction ----------------------------------------------------------


def _caller(db_path: Path, autocommit: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, isolation_level=None if autocommit else "DEFERRED")
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
    if autocommit:
        conn.execute("BEGIN")
    return conn


@pytest.mark.parametrize("autocommit", [False, True])
def test_job02_enqueue_on_caller_connection_exists_on_commit(store, db_path, autocommit) -> None:
    conn = _caller(db_path, autocommit)
    conn.execute("INSERT INTO orders (id) VALUES (1)")
    [job] = store.enqueue([NewJob(id="mail", task="t")], conn=conn)
    assert job.created and conn.in_transaction
    assert store.get("mail") is None  # not before the caller commits
    conn.execute("COMMIT") if autocommit else conn.commit()
    assert store.get("mail") is not None
    conn.close()


@pytest.mark.parametrize("autocommit", [False, True])
def test_job02_enqueue_on_caller_connection_vanishes_on_rollback(store, db_path, autocommit) -> None:
    conn = _caller(db_path, autocommit)
    conn.execute("INSERT INTO orders (id) VALUES (1)")
    store.enqueue([NewJob(id="mail", task="t")], conn=conn)
    conn.execute("ROLLBACK") if autocommit else conn.rollback()
    assert store.get("mail") is None
    assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 0
    conn.close()


def test_job02_a_refused_batch_leaves_the_callers_own_writes(store, db_path) -> None:
    conn = _caller(db_path, autocommit=False)
    conn.execute("INSERT INTO orders (id) VALUES (1)")
    with pytest.raises(JobNotFound, match="ghost"):
        store.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t", after=("ghost",))], conn=conn)
    conn.commit()
    assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 1
    assert store.get("a") is None  # all of the batch or none of it
    conn.close()


def test_job02_connection_to_another_file_is_refused(store, tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "other.db")
    with pytest.raises(ConfigError, match="not to the store's file"):
        store.enqueue([NewJob(id="a", task="t")], conn=conn)
    conn.close()


# -- fork and processes ------------------------------------------------------------------------


def test_a_connection_is_not_reused_after_fork(store) -> None:
    store.enqueue([NewJob(id=f"j{i}", task="t") for i in range(4)])
    parent_conn = store._pool.get()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            claimed = store.claim(QUEUES, Holder.current(), 2)
            fresh = store._pool.get() is not parent_conn
            code = 0 if fresh and len(claimed) == 2 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's connection still works, and sees the child's claims.
    assert store._pool.get() is parent_conn
    assert store.counts() == {"default": {"running": 2, "waiting": 2}}
    assert len(store.claim(QUEUES, Holder.current(), 10)) == 2


def _claim_all(url: str, batch: int, out: multiprocessing.Queue) -> None:
    store = open_sqlite(url)
    holder = Holder.current()
    ids: list[str] = []
    while claimed := store.claim(QUEUES, holder, batch):
        ids.extend(c.job.id for c in claimed)
        store.settle([Settlement(c.job.id, c.token, "done", result="1") for c in claimed])
    store.close()
    out.put(ids)


def test_processes_claiming_at_once_never_claim_the_same_job(store) -> None:
    total = 3000
    store.enqueue([NewJob(id=f"j{i:05d}", task="t") for i in range(total)])
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    procs = [context.Process(target=_claim_all, args=(store.url, batch, out)) for batch in (1, 3, 7)]
    for proc in procs:
        proc.start()
    claimed = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(60)
    every = [job_id for ids in claimed for job_id in ids]
    assert len(every) == len(set(every)) == total
    assert store.counts() == {"default": {"done": total}}


def test_a_claim_that_finds_nothing_due_does_not_take_the_write_lock(
    store, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty claim (a worker's clock claim, a wake-up another worker answered) only reads:
    it returns at once while another connection holds the write lock, where a write
    transaction would wait for it (and fail after the busy timeout). A due job it waits for
    as every write does, and takes once the lock is free."""
    holder = Holder.current()
    store.enqueue([NewJob(id="later", task="t", delay=3600)])  # pending, not due
    other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO paused (queue) VALUES ('nobody')")  # holds the lock
        assert store.claim(QUEUES, holder, 8) == []
        # A rate-limited queue's claim takes the lock first: its starts are counted by a time
        # read under the lock (two claimers reading first could each count without the other).
        monkeypatch.setattr(connection_module, "BUSY_TIMEOUT", 0.2)
        with pytest.raises(StoreUnavailable, match="locked"):
            store.claim({"default": QueuePolicy("default", rate=(5, 1.0))}, holder, 8)
        monkeypatch.undo()
        other.execute("COMMIT")
        store.enqueue([NewJob(id="now", task="t")])
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.2, lambda: other.execute("COMMIT"))
        release.start()
        assert [c.job.id for c in store.claim(QUEUES, holder, 8)] == ["now"]
        release.join()
    finally:
        other.close()


# -- wait --------------------------------------------------------------------------------------


def test_wait_wakes_on_another_connections_commit(store, db_path: Path) -> None:
    assert store.wait(["default"], 0.05) is False  # idle: times out
    # The writer commits without an fsync (WAL, synchronous=NORMAL): what is timed is the
    # wake-up, not the disk, whose fsync can stall for a second behind other writeback.
    other = open_sqlite(url_of(db_path, "synchronous=normal"))
    timer = threading.Timer(0.1, lambda: other.enqueue([NewJob(id="x", task="t")]))
    started = time.monotonic()
    timer.start()
    try:
        assert store.wait(["default"], 5.0) is True
        assert time.monotonic() - started < 1.0
    finally:
        timer.join()
        other.close()


def test_connections_of_finished_threads_are_closed(store) -> None:
    def use() -> None:
        store.get("nothing")

    for _ in range(20):
        thread = threading.Thread(target=use)
        thread.start()
        thread.join()
    gc.collect()
    assert store._pool.open_connections <= 1  # at most this thread's own
