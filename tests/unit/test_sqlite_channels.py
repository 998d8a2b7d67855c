"""The SQLite store's wake-up channels (channels.py): which writes wake which queue (those that
can make its jobs claimable) and which wake nobody (an idle fleet's heartbeats, claims,
renewals), a claim that leaves jobs behind passing the wake-up on, a token that waits for the
next wait, one token waking one of two waiting threads, and the polling fallback."""

from __future__ import annotations

import os
import select
import sqlite3
import stat
import threading
import time

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement, WorkerBeat
from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite import store as store_module
from tinyjobs.stores.sqlite.channels import PASSED, SCHEDULED, TOKEN, Channels, _open_fifo, channel_path
from tinyjobs.stores.sqlite.doorbell import WAKE_ENV

pytestmark = pytest.mark.skipif(not Channels("/nonexistent").enabled, reason="no epoll here")

QUEUES = {"default": QueuePolicy("default")}
LIMITED = {"default": QueuePolicy("default", concurrency=2)}


@pytest.fixture
def sq(tmp_path):
    sq = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    yield sq
    sq.close()


class Observer:
    """The channels of some queues, read directly: made before the writes (a queue's channel
    exists once a thread waits for it: writes to a queue nobody waits for send nothing)."""

    def __init__(self, sq, *queues: str) -> None:
        self.fds = {}
        for q in queues:
            fd = _open_fifo(channel_path(sq.path, q), create=True)
            assert fd is not None
            self.fds[q] = fd

    def tokens(self) -> dict[str, bytes]:
        """The tokens each queue got since the last look (they are taken)."""
        got = {}
        for q, fd in self.fds.items():
            try:
                got[q] = os.read(fd, 65536)
            except BlockingIOError:
                pass
        return got

    def woken(self) -> set[str]:
        """The queues that got a token since the last look."""
        return set(self.tokens())

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


@pytest.fixture
def seen(sq):
    observer = Observer(sq, "default", "mail")
    yield observer
    observer.close()


def test_enqueue_wakes_its_queue_and_the_idle_fleets_writes_do_not(sq, seen):
    holder = Holder.current()
    sq.enqueue([NewJob(id="a", task="t")])
    assert seen.tokens() == {"default": TOKEN}
    assert seen.woken() == set()  # taken
    sq.enqueue([NewJob(id="m", task="t", queue="mail"), NewJob(id="b", task="t")])
    assert seen.woken() == {"default", "mail"}
    sq.enqueue([NewJob(id="later", task="t", delay=60)])
    # due later: no job to claim, a SCHEDULED token (a waiter reads the due time again)
    assert seen.tokens() == {"default": SCHEDULED}
    claimed = sq.claim(QUEUES, holder, 8)
    assert len(claimed) == 2 and sq.claim(QUEUES, holder, 8) == []  # nothing left behind
    sq.renew([c.token for c in claimed])
    sq.beat(WorkerBeat(host="h", pid=os.getpid(), queues=("default",), slots=1, busy=1, started_at=0.0))
    sq.lead("leader", "me", 10.0)
    sq.reap()
    sq.pause("default")
    assert seen.woken() == set()


def test_a_plain_done_wakes_nobody_and_the_slow_ways_wake_the_queue(sq, seen):
    holder = Holder.current()
    sq.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t")])
    seen.woken()
    a, b = sq.claim(QUEUES, holder, 8)
    sq.settle_and_claim([Settlement(a.job.id, a.token, "done", result="1")], QUEUES, holder, 0)
    assert seen.woken() == set()  # nothing became claimable
    sq.settle_and_claim([Settlement(b.job.id, b.token, "retry", error="x", delay=0)], QUEUES, holder, 0)
    assert seen.woken() == {"default"}  # pending again


def test_a_done_that_frees_room_or_releases_dependents_wakes_their_queues(sq, seen):
    holder = Holder.current()
    sq.enqueue([NewJob(id="a", task="t")])
    sq.enqueue([NewJob(id="b", task="t", queue="mail", after=("a",))])
    seen.woken()
    [a] = sq.claim(QUEUES, holder, 8)
    sq.settle_and_claim([Settlement(a.job.id, a.token, "done")], QUEUES, holder, 0)
    assert seen.woken() == {"mail"}  # b released, in its own queue
    sq.enqueue([NewJob(id="c", task="t")])
    seen.woken()
    [c] = sq.claim(LIMITED, holder, 8)
    sq.settle_and_claim([Settlement(c.job.id, c.token, "done")], LIMITED, holder, 0)
    assert seen.woken() == {"default"}  # room under the queue's concurrency limit


def test_resume_retry_and_an_ended_lease_wake_the_queue(sq, seen):
    sq.pause("mail")
    sq.resume("mail")
    assert seen.woken() == {"mail"}
    sq.enqueue([NewJob(id="a", task="t")])
    [a] = sq.claim(QUEUES, Holder.current(), 8)
    sq.settle([Settlement(a.job.id, a.token, "fail", error="x")])
    seen.woken()
    assert sq.retry("a")
    assert seen.woken() == {"default"}
    [a] = sq.claim(QUEUES, Holder.current(), 8)
    assert sq.reap(now=time.time() + 3600) == 1
    assert seen.woken() == {"default"}


def test_a_claim_that_leaves_jobs_behind_passes_the_wake_up_on(sq, seen):
    holder = Holder.current()
    sq.enqueue([NewJob(id=f"j{i}", task="t") for i in range(5)])
    seen.woken()
    assert len(sq.claim(QUEUES, holder, 2)) == 2
    assert seen.tokens() == {"default": PASSED}  # three left: another waiter's turn
    assert len(sq.settle_and_claim([], QUEUES, holder, 2)[1]) == 2
    assert seen.tokens() == {}  # a worker's own cycle: it comes back for the rest itself
    assert len(sq.claim(QUEUES, holder, 1)) == 1  # the last one: none left behind
    assert seen.woken() == set()
    sq.enqueue([NewJob(id=f"k{i}", task="t") for i in range(3)])
    seen.woken()
    assert len(sq.claim(LIMITED, holder, 8)) == 0  # two running already (the limit)
    assert seen.woken() == set()  # another worker could not take them either


def waiting_in_epoll(tid: int) -> bool:
    """Whether thread `tid` of this process sleeps in epoll_wait now."""
    with open(f"/proc/self/task/{tid}/wchan") as f:
        return "epoll" in f.read()


class TwoWorkers:
    """This worker's store watcher (a thread waiting on `sq`, first in the kernel's line of
    waiters) and an idle worker's (a thread waiting on another store of the same file),
    both asleep in epoll_wait; `woke` names the threads whose waits a wake-up ended."""

    def __init__(self, sq, path) -> None:
        self.other = open_sqlite(f"sqlite:///{path}")
        self.woke: list[str] = []
        self.tids: dict[str, int] = {}
        self.stop = threading.Event()
        self.sq = sq
        sq.wait(["default"], 0)  # the listener of this worker's store, first in line
        self.threads = []
        deadline = time.monotonic() + 10
        for name, store in (("own", sq), ("idle", self.other)):
            thread = threading.Thread(target=self._wait, args=(name, store), daemon=True)
            thread.start()
            self.threads.append(thread)
            while not (name in self.tids and waiting_in_epoll(self.tids[name])):
                assert time.monotonic() < deadline, f"the {name} thread never waited"
                time.sleep(0.001)

    def _wait(self, name: str, store) -> None:
        self.tids[name] = threading.get_native_id()
        while not self.stop.is_set():
            if store.wait(["default"], 60.0) and not self.stop.is_set():
                self.woke.append(name)

    def first_woken(self) -> str:
        deadline = time.monotonic() + 10
        while not self.woke and time.monotonic() < deadline:
            time.sleep(0.001)
        assert self.woke, "nobody woke"
        return self.woke[0]

    def close(self) -> None:
        self.stop.set()
        deadline = time.monotonic() + 20
        while any(t.is_alive() for t in self.threads) and time.monotonic() < deadline:
            self.sq._channels.wake(["default"])  # one token: one waiter leaves
            for t in self.threads:
                t.join(0.05)
        self.other.close()


@pytest.fixture
def two(sq, tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)  # only tokens end these waits
    two = TwoWorkers(sq, tmp_path / "jobs.db")
    yield two
    two.close()


def test_a_worker_that_fills_its_slots_steps_back_for_the_idle_ones(sq, two):
    """A worker's store watcher goes back to waiting before its worker claims: once that claim
    filled the worker, the next job's token must go to the idle worker, not to that watcher."""
    later = time.time() + 60
    sq.enqueue([NewJob(id="a", task="t", at=later)])  # due later: no token
    assert len(sq.claim(QUEUES, Holder.current(), 1, now=later)) == 1  # full
    assert two.woke == []
    sq.enqueue([NewJob(id="b", task="t")])
    assert two.first_woken() == "idle"


def test_the_wake_up_a_claim_passes_on_goes_to_another_worker(sq, two):
    later = time.time() + 60
    sq.enqueue([NewJob(id=f"j{i}", task="t", at=later) for i in range(5)])  # due later: no token
    assert len(sq.claim(QUEUES, Holder.current(), 2, now=later)) == 2  # three left behind
    assert two.first_woken() == "idle"


def test_a_token_sent_between_two_waits_ends_the_next_one(sq, tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)  # only the token can end the wait
    assert sq.wait(["default"], 0) is False  # a first look: the listener is made
    other = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    other.enqueue([NewJob(id="a", task="t")])  # while this thread does not wait
    other.close()
    started = time.monotonic()
    assert sq.wait(["default"], 30.0) is True
    assert time.monotonic() - started < 10.0
    assert sq.wait(["default"], 0) is False  # the token was taken


def test_a_passed_on_token_nobody_waited_for_does_not_end_a_later_wait(sq, tmp_path, monkeypatch):
    """A claim passes a token on for a worker waiting at that moment; when none was, the busy
    workers take the jobs on their own cycle, and a draining worker's watcher must not turn
    its loop for it each time it goes back to waiting."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)
    assert sq.wait(["default"], 0) is False  # the listener is made
    other = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    other._channels.pass_on(["default"])
    assert sq.wait(["default"], 0) is False
    other._channels.wake(["default"])  # a job's token left there does end it
    assert sq.wait(["default"], 0) is True
    other.close()


def test_each_token_wakes_one_of_two_waiting_threads(sq, monkeypatch):
    """Ten jobs one after the other, each once the previous one's wake-up was seen: ten
    wake-ups in all. Were every waiter woken (the herd), the other thread would wake for each
    job as well, within microseconds of the first: 19 or 20."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)  # only tokens end these waits
    woke: list[str] = []
    stop = threading.Event()
    ready = threading.Barrier(3)

    def waiter(name: str) -> None:
        sq.wait(["default"], 0)  # a first look: the listener is made
        ready.wait(10)
        while True:
            if sq.wait(["default"], 60.0):
                if stop.is_set():
                    return
                woke.append(name)

    threads = [threading.Thread(target=waiter, args=(n,), daemon=True) for n in ("a", "b")]
    for t in threads:
        t.start()
    ready.wait(10)
    for n in range(1, 11):
        sq.enqueue([NewJob(id=f"job-{n}", task="t")])
        deadline = time.monotonic() + 10
        while len(woke) < n and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(woke) >= n, f"job {n} woke nobody"
    stop.set()
    deadline = time.monotonic() + 20
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        sq._channels.wake(["default"])  # one token: one waiter leaves
        for t in threads:
            t.join(0.05)
    assert not any(t.is_alive() for t in threads)
    assert len(woke) == 10


def test_channels_are_fifos_that_hold_nothing_on_disk(sq, seen):
    sq.enqueue([NewJob(id=f"j{i}", task="t") for i in range(3)])
    odd = "mail/room 2 ✉"
    Observer(sq, odd).close()  # makes the FIFO, as a waiter's listener does
    for queue in ("default", "mail", odd):
        path = channel_path(sq.path, queue)
        assert os.path.dirname(path) == os.path.dirname(sq.path)
        st = os.stat(path)
        assert stat.S_ISFIFO(st.st_mode) and st.st_size == 0


def test_a_replaced_channel_is_found_again(sq, tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "SAFETY_TICK", 0.05)
    sq.wait(["default"], 0)
    path = channel_path(sq.path, "default")
    os.unlink(path)  # removed under the listener: the writers can no longer reach it
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline:
        sq.wait(["default"], 0.1)  # its safety tick notices, the next wait makes a new one
    assert os.path.exists(path)
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)
    sq.wait(["default"], 0)
    other = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    other.enqueue([NewJob(id="a", task="t")])
    other.close()
    started = time.monotonic()
    assert sq.wait(["default"], 30.0) is True
    assert time.monotonic() - started < 10.0


def test_the_fallback_polls(tmp_path, monkeypatch):
    monkeypatch.setenv(WAKE_ENV, "poll")
    sq = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    try:
        assert sq._channels.listen(["default"]) == (None, False)
        sq.wait(["default"], 0)  # a first look
        other = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
        other.enqueue([NewJob(id="a", task="t")])
        other.close()
        assert sq.wait(["default"], 10.0) is True
    finally:
        sq.close()


def test_a_forked_child_waits_on_listeners_of_its_own(sq, monkeypatch):
    """The parent waited (its listener and writers exist) and then forks: the child starts
    afresh (its copies of the parent's descriptors closed, the lock new) and is woken by a
    job the parent enqueues while only the child waits."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)
    sq.wait(["default"], 0)
    sq.enqueue([NewJob(id="before", task="t", delay=60)])
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether a token ended its wait, then leave at once
        try:
            sq.wait(["default"], 0)  # its own listener
            os.write(write_end, b"r")
            os.write(write_end, b"w" if sq.wait(["default"], 30.0) else b"t")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"r"
        # The child's listener is made; its wait may not have begun yet, but a token written
        # before it sleeps waits in the channel for it.
        sq.enqueue([NewJob(id="after", task="t")])
        ready, _, _ = select.select([read_end], [], [], 30)
        assert ready and os.read(read_end, 1) == b"w"
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


def test_a_writer_makes_its_queues_channel_and_the_first_waiter_finds_the_token(tmp_path, monkeypatch):
    """A process that only enqueues (no worker has waited on this host yet) makes the FIFO at
    its first wake-up and keeps it open, instead of looking for a missing file at every
    enqueue; the token it left ends the first wait of the first waiter."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 3600.0)  # only the token can end the wait
    writer = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    path = channel_path(writer.path, "default")
    assert not os.path.exists(path)
    writer.enqueue([NewJob(id="a", task="t")])
    assert stat.S_ISFIFO(os.stat(path).st_mode)
    waiter = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    try:
        assert waiter.wait(["default"], 30.0) is True
        assert waiter.wait(["default"], 0) is False  # the token was taken
    finally:
        waiter.close()
        writer.close()


def test_a_tokens_wake_up_reads_nothing_and_a_silent_commit_is_still_told(sq, tmp_path, monkeypatch):
    """A wait that a token ends runs no statement (no read transaction per job at a low
    rate); a commit that sends no token (an enqueue in the caller's own transaction), made
    after such a wake-up, still ends a later wait: the look a SAFETY_TICK after the last one
    compares with the baseline from before the tokens."""
    monkeypatch.setattr(store_module, "SAFETY_TICK", 0.05)
    assert sq.wait(["default"], 0) is False  # the listener is made, the baseline set
    statements: list[str] = []
    sq._pool.get("wait").set_trace_callback(statements.append)
    other = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    try:
        other.enqueue([NewJob(id="a", task="t")])
        assert sq.wait(["default"], 30.0) is True
        assert statements == []
        silent = sqlite3.connect(tmp_path / "jobs.db")
        other.enqueue([NewJob(id="b", task="t")], conn=silent)  # the caller's transaction
        silent.commit()  # no token: the store does not see this commit
        silent.close()
        assert sq.wait(["default"], 30.0) is True
        assert any("data_version" in s for s in statements)
    finally:
        other.close()
