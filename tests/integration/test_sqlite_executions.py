"""SQLite writes an attempt's execution row once, when the attempt ends (migration 5): while it
runs the job's row describes it. What the contracts cannot see from outside: no row at the
claim, the host and pid read back from the holder, rate limits counting running attempts from
the jobs' rows, and the open rows an older version's claim wrote (at upgrade time, or by a
worker of that version still running), which are closed instead of written twice."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.sqlite import open as open_sqlite

T0 = 1_700_000_000.0
ON = {"default": QueuePolicy("default", lease=30)}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def lite(db_path: Path):
    instance = open_sqlite(f"sqlite:///{db_path}")
    yield instance
    instance.close()


def _rows(path: Path, where: str = "1") -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT j.id, e.attempt, e.host, e.pid, e.started_at, e.ended_at, e.outcome "
            f"FROM executions e JOIN jobs j ON j.seq = e.job_seq WHERE {where} ORDER BY e.id"
        ).fetchall()


def _open_row(path: Path, job_id: str, holder: Holder, attempt: int, started_at: float) -> None:
    """The open execution row an older tinyjobs wrote at its claim."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute(
            "INSERT INTO executions (job_seq, attempt, host, pid, started_at, queue, grp) "
            "SELECT seq, ?, ?, ?, ?, queue, grp FROM jobs WHERE id = ?",
            (attempt, holder.hostname, holder.pid, started_at, job_id),
        )


def test_the_claim_writes_no_row_and_get_reads_the_running_attempt_from_the_job(lite, db_path):
    lite.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t")], now=T0)
    usual, odd = Holder("box/boot-id", 4242, 7), Holder("we|ird", 5, 6)  # hostname "we|ird"
    [a] = lite.claim(ON, usual, 1, now=T0)
    [b] = lite.claim(ON, odd, 1, now=T0 + 1)
    assert _rows(db_path) == []
    running = lite.get("a", now=T0 + 1, executions=True).executions
    assert [(e.attempt, e.host, e.pid, e.started_at, e.ended_at, e.outcome) for e in running] == [
        (1, "box", 4242, T0, None, None)
    ]
    [other] = lite.get("b", now=T0 + 1, executions=True).executions
    assert (other.host, other.pid) == ("we|ird", 5)
    ends = [Settlement("a", a.token, "done"), Settlement("b", b.token, "retry", error="e")]
    assert lite.settle(ends, now=T0 + 2) == [True, True]
    assert sorted(_rows(db_path)) == [
        ("a", 1, "box", 4242, T0, T0 + 2, "done"),
        ("b", 1, "we|ird", 5, T0 + 1, T0 + 2, "error"),
    ]
    [again] = lite.claim(ON, usual, 1, now=T0 + 3)
    both = lite.get("b", now=T0 + 3, executions=True).executions
    assert [(e.attempt, e.pid, e.outcome) for e in both] == [(1, 5, "error"), (2, 4242, None)]


def test_a_snoozed_attempt_is_recorded_under_the_number_it_ran_as(lite, db_path):
    lite.enqueue([NewJob(id="a", task="t")], now=T0)
    by = Holder("box/b", 1, 1)
    [a] = lite.claim(ON, by, 1, now=T0)
    assert lite.settle([Settlement("a", a.token, "snooze", delay=0)], now=T0 + 1)
    assert lite.get("a", now=T0 + 1).attempts == 0
    [a] = lite.claim(ON, by, 1, now=T0 + 2)
    assert lite.settle([Settlement("a", a.token, "handback")], now=T0 + 3)
    assert [(r[1], r[6]) for r in _rows(db_path)] == [(1, "snoozed"), (1, "handed back")]


def test_a_rate_limit_counts_the_attempts_still_running(lite):
    """Their starts are on their jobs' rows only: a limit that read the executions alone would
    let a third job start while two run."""
    lite.enqueue([NewJob(id=f"j{i}", task="t") for i in range(4)], now=T0)
    limited = {"default": QueuePolicy("default", lease=30, rate=(2, 60.0))}
    by = Holder("box/b", 1, 1)
    first = lite.claim(limited, by, 2, now=T0)
    assert len(first) == 2
    assert lite.claim(limited, by, 2, now=T0 + 1) == []
    assert lite.settle([Settlement(first[0].job.id, first[0].token, "done")], now=T0 + 2) == [True]
    assert lite.claim(limited, by, 2, now=T0 + 3) == []  # one ended, one running: still two
    assert len(lite.claim(limited, by, 2, now=T0 + 61)) == 2


def test_an_older_versions_open_rows_are_closed_not_written_twice(lite, db_path):
    """A rolling upgrade: attempts an older tinyjobs claimed carry an open row. A done batch,
    a retry and the reaper of this version close that row; `get` lists each attempt once
    meanwhile; the rollups count each once."""
    ids = ["a", "b", "c", "d"]
    lite.enqueue([NewJob(id=i, task="t") for i in ids], now=T0)
    old = Holder("old/b", 1, 1)
    claimed = {c.job.id: c for c in lite.claim(ON, old, 4, now=T0)}
    for job_id in ("a", "b", "c"):  # what an older claim wrote; d has no row (this version's)
        _open_row(db_path, job_id, old, 1, T0)
    [running] = lite.get("a", now=T0 + 1, executions=True).executions
    assert (running.attempt, running.host, running.pid, running.outcome) == (1, "old", 1, None)
    ends = [
        Settlement("a", claimed["a"].token, "done"),
        Settlement("d", claimed["d"].token, "done"),
        Settlement("b", claimed["b"].token, "retry", error="e", delay=100),
    ]
    assert lite.settle(ends, now=T0 + 2) == [True, True, True]
    assert lite.reap(now=T0 + 40) == 1  # c's lease
    assert _rows(db_path, "e.ended_at IS NULL") == []
    assert sorted((r[0], r[1], r[6]) for r in _rows(db_path)) == [
        ("a", 1, "done"),
        ("b", 1, "error"),
        ("c", 1, "lease expired"),
        ("d", 1, "done"),
    ]
    stats = lite.execution_stats([1], now=T0 + 40)
    assert sorted((s.outcome, s.count) for s in stats) == [("done", 2), ("error", 1), ("lease expired", 1)]


def test_migration_5_keeps_the_open_rows_of_attempts_running_at_upgrade(db_path):
    """A file at version 4 with attempts running, each with its open execution row (as version
    4 claimed): after migration 5 each is on record once while it runs and once when it ends,
    counted once by the rollups (exec_stats_end for a closed row, exec_stats_insert for new)."""
    first = open_sqlite(f"sqlite:///{db_path}")
    first.enqueue([NewJob(id=i, task="t") for i in ("a", "b", "c")], now=T0)
    by = Holder("box/b", 9, 1)
    claimed = {c.job.id: c for c in first.claim(ON, by, 3, now=T0)}
    first.close()
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        conn.execute("DELETE FROM schema_version WHERE version >= 5")
        conn.execute("DROP TRIGGER exec_stats_insert")  # migration 2's, as version 4 has it
        conn.execute(
            "CREATE TRIGGER exec_stats_insert AFTER INSERT ON executions WHEN new.ended_at IS NOT NULL "
            "BEGIN INSERT OR IGNORE INTO exec_stats (queue, outcome, upto, n, seconds) "
            "VALUES (new.queue, new.outcome, new.upto, 0, 0); "
            "UPDATE exec_stats SET n = n + 1, seconds = seconds + new.seconds "
            "WHERE queue = new.queue AND outcome = new.outcome AND upto = new.upto; "
            "INSERT OR IGNORE INTO exec_minutes (minute, outcome, n) VALUES (new.minute, new.outcome, 0); "
            "UPDATE exec_minutes SET n = n + 1 WHERE minute = new.minute AND outcome = new.outcome; END"
        )
    for job_id in ("a", "b"):
        _open_row(db_path, job_id, by, 1, T0)
    again = open_sqlite(f"sqlite:///{db_path}")
    try:
        with sqlite3.connect(db_path) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] >= 5
        [running] = again.get("a", now=T0 + 1, executions=True).executions
        assert (running.attempt, running.host, running.pid, running.ended_at) == (1, "box", 9, None)
        settles = [Settlement(i, claimed[i].token, "done") for i in ("a", "c")]
        assert again.settle(settles, now=T0 + 2) == [True, True]
        assert again.reap(now=T0 + 40) == 1  # b's lease
        assert sorted((r[0], r[6]) for r in _rows(db_path)) == [
            ("a", "done"),
            ("b", "lease expired"),
            ("c", "done"),
        ]
        stats = again.execution_stats([1], now=T0 + 40)
        assert sorted((s.outcome, s.count) for s in stats) == [("done", 2), ("lease expired", 1)]
    finally:
        again.close()
