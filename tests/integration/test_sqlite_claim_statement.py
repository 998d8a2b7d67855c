"""The SQLite claim of one queue without limits: one autocommit statement (claim.claim_due),
its leases committed when it returns, its steps and left-behind jobs as the longer claim had
them; other claims keep their transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.sqlite import open as open_sqlite

QUEUES = {"default": QueuePolicy("default")}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def lite(db_path: Path):
    instance = open_sqlite(f"sqlite:///{db_path}")
    yield instance
    instance.close()


def _statements(lite, call):
    """The statements `call()` runs on this thread's connection of the store, and its result.
    (The trace callback is called again with a statement's text for each trigger it fires:
    repeats in a row are one statement.)"""
    seen: list[str] = []
    conn = lite._pool.get()
    conn.set_trace_callback(lambda sql: None if seen and seen[-1] == sql else seen.append(sql))
    try:
        out = call()
    finally:
        conn.set_trace_callback(None)
    return seen, out


def test_a_claim_of_one_queue_without_limits_is_one_statement_committed_when_it_returns(
    lite, db_path: Path
) -> None:
    lite.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t", priority=5)])
    seen, got = _statements(lite, lambda: lite.claim(QUEUES, Holder.current(), 8))
    assert [c.job.id for c in got] == ["b", "a"]  # claim order: priority first
    assert len(seen) == 1 and "UPDATE jobs SET" in seen[0], seen  # no BEGIN, no COMMIT
    other = sqlite3.connect(db_path)
    try:  # committed: another connection sees both leases, with their tokens
        rows = dict(other.execute("SELECT id, token FROM jobs WHERE state = 'running'").fetchall())
    finally:
        other.close()
    assert rows == {c.job.id: c.token for c in got}


def test_claims_with_limits_or_several_queues_keep_their_transaction(lite) -> None:
    lite.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t", queue="other")])
    limited = {"default": QueuePolicy("default", concurrency=2)}
    seen, got = _statements(lite, lambda: lite.claim(limited, Holder.current(), 8))
    assert [c.job.id for c in got] == ["a"]
    assert seen[0] == "BEGIN" and seen[-1] == "COMMIT", seen
    two = {"default": QueuePolicy("default"), "other": QueuePolicy("other")}
    seen, got = _statements(lite, lambda: lite.claim(two, Holder.current(), 8))
    assert [c.job.id for c in got] == ["b"]
    assert seen[0] == "BEGIN" and seen[-1] == "COMMIT", seen


def test_the_steps_an_attempt_kept_come_back_with_the_one_statement_claim(lite) -> None:
    holder = Holder.current()
    lite.enqueue([NewJob(id="a", task="t"), NewJob(id="plain", task="t", priority=-1)])
    (first,) = lite.claim(QUEUES, holder, 1)
    assert first.job.id == "a" and first.steps == {}
    assert lite.save_step(first.token, "fetch", '{"n": 1}')
    assert lite.save_step(first.token, "parse", '"ok"')
    assert lite.settle([Settlement(job_id="a", token=first.token, outcome="handback")]) == [True]
    got = lite.claim(QUEUES, holder, 8)
    kept = {"fetch": '{"n": 1}', "parse": '"ok"'}
    assert [(c.job.id, c.steps) for c in got] == [("a", kept), ("plain", {})]


@pytest.mark.parametrize(("due", "passed_on"), [(3, True), (2, False)])
def test_a_full_claim_passes_the_wake_up_on_only_when_due_jobs_are_left(
    lite, monkeypatch: pytest.MonkeyPatch, due: int, passed_on: bool
) -> None:
    lite.enqueue([NewJob(id=f"j{i}", task="t") for i in range(due)])
    lite.enqueue([NewJob(id="later", task="t", delay=3600)])  # pending, not due: not left
    passed: list[set[str]] = []
    monkeypatch.setattr(lite._channels, "pass_on", lambda queues: passed.append(set(queues)))
    got = lite.claim(QUEUES, Holder.current(), 2)
    assert [c.job.id for c in got] == ["j0", "j1"]
    assert passed == ([{"default"}] if passed_on else [])
