"""The SQLite doorbell: which writes ring it (those that can make a job claimable) and which
do not (an idle fleet's heartbeats, claims, renewals), and the polling fallback."""

from __future__ import annotations

import os

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement, WorkerBeat
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.doorbell import WAKE_ENV, Doorbell

pytestmark = pytest.mark.skipif(not Doorbell("/nonexistent").enabled, reason="no inotify here")

QUEUES = {"default": QueuePolicy("default")}
LIMITED = {"default": QueuePolicy("default", concurrency=2)}


@pytest.fixture
def sq(tmp_path):
    sq = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    yield sq
    sq.close()


@pytest.fixture
def watch(sq):
    watch, new = sq._bell.watch()
    assert watch is not None and new
    return watch


def rang(watch) -> bool:
    return watch.ready(0)


def test_enqueue_rings_and_the_idle_fleets_writes_do_not(sq, watch):
    holder = Holder.current()
    sq.enqueue([NewJob(id="a", task="t")])
    assert rang(watch)
    assert not rang(watch)  # consumed
    [claimed] = sq.claim(QUEUES, holder, 8)
    assert sq.claim(QUEUES, holder, 8) == []  # an empty claim
    sq.renew([claimed.token])
    sq.beat(WorkerBeat(host="h", pid=os.getpid(), queues=("default",), slots=1, busy=1, started_at=0.0))
    sq.lead("leader", "me", 10.0)
    sq.reap()
    assert not rang(watch)


def test_a_plain_done_settles_quietly_and_the_rest_ring(sq, watch):
    holder = Holder.current()
    sq.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t")])
    rang(watch)
    a, b = sq.claim(QUEUES, holder, 8)
    sq.settle_and_claim([Settlement(a.job.id, a.token, "done", result="1")], QUEUES, holder, 0)
    assert not rang(watch)  # nothing became claimable
    sq.settle_and_claim([Settlement(b.job.id, b.token, "retry", error="x", delay=5)], QUEUES, holder, 0)
    assert rang(watch)  # pending again: a waiter must learn its due time


def test_a_done_that_frees_room_or_dependents_rings(sq, watch):
    holder = Holder.current()
    sq.enqueue([NewJob(id="a", task="t")])
    sq.enqueue([NewJob(id="b", task="t", after=("a",))])
    rang(watch)
    [a] = sq.claim(QUEUES, holder, 8)
    sq.settle_and_claim([Settlement(a.job.id, a.token, "done")], QUEUES, holder, 0)
    assert rang(watch)  # b released
    [b] = sq.claim(LIMITED, holder, 8)
    sq.settle_and_claim([Settlement(b.job.id, b.token, "done")], LIMITED, holder, 0)
    assert rang(watch)  # room under the queue's concurrency limit


def test_resume_and_retry_ring(sq, watch):
    sq.pause("default")
    sq.resume("default")
    assert rang(watch)
    sq.enqueue([NewJob(id="a", task="t")])
    [a] = sq.claim(QUEUES, Holder.current(), 8)
    sq.settle([Settlement(a.job.id, a.token, "fail", error="x")])
    rang(watch)
    assert sq.retry("a")
    assert rang(watch)


def test_the_fallback_polls(tmp_path, monkeypatch):
    monkeypatch.setenv(WAKE_ENV, "poll")
    sq = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    try:
        assert sq._bell.watch() == (None, False)
        sq.wait(["default"], 0)  # a first look
        other = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
        other.enqueue([NewJob(id="a", task="t")])
        other.close()
        assert sq.wait(["default"], 10.0) is True
    finally:
        sq.close()
