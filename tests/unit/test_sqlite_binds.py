"""No None bound as a parameter on the hot paths of the SQLite store: a plain enqueue (one job
and a batch, with and without a group) and a batch of done settlements. Python's sqlite3 module
looks an adapter up for every None it binds, raising and clearing an AttributeError on the
way (about 2,300 instructions each): those columns are NULL in the statements instead
(insert_job_plain, insert_execution_done). The rows written are the same."""

from __future__ import annotations

import time

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.enqueue import enqueue_batch
from tinyjobs.stores.sqlite.lifecycle import settle_done_batch

QUEUES = {"default": QueuePolicy("default")}


class Recording:
    """A connection or cursor whose statements' parameters are kept."""

    def __init__(self, target) -> None:
        self.target = target
        self.bound: list = []

    def execute(self, sql, params=()):
        self.bound.append(params)
        return self.target.execute(sql, params)

    def executemany(self, sql, rows):
        rows = list(rows)
        self.bound.extend(rows)
        return self.target.executemany(sql, rows)


def nones(bound: list) -> int:
    values = [v for params in bound for v in (params.values() if isinstance(params, dict) else params)]
    return sum(v is None for v in values)


@pytest.fixture
def sq(tmp_path):
    sq = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    yield sq
    sq.close()


@pytest.mark.parametrize("group", [None, "g"])
@pytest.mark.parametrize("size", [1, 3])
def test_a_plain_enqueue_and_its_done_settlements_bind_no_none(sq, group, size):
    conn = sq._pool.get()
    now = time.time()
    jobs = [NewJob(id=f"j{i}", task="t", group=group) for i in range(size)]
    cur = Recording(conn.cursor())
    conn.execute("BEGIN IMMEDIATE")
    enqueue_batch(cur, jobs, now)
    conn.execute("COMMIT")
    assert nones(cur.bound) == 0
    row = conn.execute(
        "SELECT state, key, grp, after_ids, error, finished_at, expires_at, attempts, due FROM jobs "
        "WHERE id = 'j0'"
    ).fetchone()
    assert tuple(row) == ("pending", None, group, None, None, None, None, 0, now)

    claimed = sq.claim(QUEUES, Holder.current(), size)
    assert len(claimed) == size
    db = Recording(conn)
    conn.execute("BEGIN IMMEDIATE")
    settled = [Settlement(c.job.id, c.token, "done") for c in claimed]
    applied, _, _ = settle_done_batch(db, settled, time.time())
    conn.execute("COMMIT")
    assert len(applied) == size
    assert nones(db.bound) == 0
    row = conn.execute("SELECT outcome, error, grp, queue, attempt FROM executions").fetchone()
    assert tuple(row) == ("done", None, group, "default", 1)
    assert sq.get("j0", executions=True).executions[0].outcome == "done"


def test_a_batch_with_and_without_groups_is_written_as_before(sq):
    """Jobs with a group and without in one batch: the statement that binds every column."""
    now = time.time()
    jobs = [NewJob(id="a", task="t", group="g"), NewJob(id="b", task="t")]
    assert [j.id for j in sq.enqueue(jobs, now=now)] == ["a", "b"]
    claimed = sq.claim(QUEUES, Holder.current(), 2, now=now)
    flags, _ = sq.settle_and_claim(
        [Settlement(c.job.id, c.token, "done") for c in claimed], QUEUES, Holder.current(), 0
    )
    assert flags == [True, True]
    conn = sq._pool.get()
    rows = conn.execute("SELECT grp FROM executions ORDER BY job_seq").fetchall()
    assert [tuple(r) for r in rows] == [("g",), (None,)]
