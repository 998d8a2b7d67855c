"""The SQLite store's unlock bell: a writer waiting for the write lock wakes when another
writer commits, not at the end of its back-off sleep."""

from __future__ import annotations

import threading
import time

import pytest

from tinyjobs.stores.base import NewJob
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.doorbell import WAKE_ENV, Doorbell

pytestmark = pytest.mark.skipif(not Doorbell("/nonexistent").enabled, reason="no inotify here")


@pytest.fixture
def sq(tmp_path):
    sq = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    yield sq
    sq.close()


def test_a_commit_ends_the_wait_for_the_lock(sq):
    sq._pause_for_lock(0)  # this thread's first wait sets its watch up
    writer = threading.Timer(0.05, lambda: sq.enqueue([NewJob(id="a", task="t")]))
    writer.start()
    started = time.monotonic()
    sq._pause_for_lock(10.0)  # a back-off this long would be noticed
    waited = time.monotonic() - started
    writer.join()
    assert waited < 5.0, f"the wait ran {waited:.1f} s: the commit did not end it"


def test_a_waiting_writer_takes_the_lock_as_the_holder_commits(sq):
    sq.enqueue([NewJob(id="first", task="t")])
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with sq._write():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    added: list[float] = []

    def add() -> None:
        sq.enqueue([NewJob(id="second", task="t")])
        added.append(time.monotonic())

    waiter = threading.Thread(target=add)
    waiter.start()
    time.sleep(0.2)  # the waiter is in begin_immediate's back-off now (it cannot get the lock)
    assert not added
    released = time.monotonic()
    release.set()
    holder.join(10)
    waiter.join(10)
    assert added and added[0] - released < 1.0
    assert sq.get("second") is not None


def test_without_inotify_the_wait_sleeps_its_back_off(tmp_path, monkeypatch):
    monkeypatch.setenv(WAKE_ENV, "poll")
    sq = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    try:
        assert sq._unlock.watch() == (None, False)
        started = time.monotonic()
        sq._pause_for_lock(0.05)
        assert time.monotonic() - started >= 0.05
    finally:
        sq.close()
