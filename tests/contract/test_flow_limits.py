"""LIM-01..03 through `app.queue(...)` and `enqueue(..., group=...)`, on every store: limits are
counted in the claim, across every claimer at once, and rate windows are exact."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from helpers import holder

import tinyjobs
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement

T0 = 1_700_000_000.0


@pytest.fixture
def clock():
    return tinyjobs.FakeClock(T0)


@pytest.fixture
def app(store, clock):
    app = tinyjobs.App(store, clock=clock)

    @app.task(queue="limited")
    def work(run, n=0):
        return n

    return app


def claim(app, limit=10, pid=1):
    return app.store.claim(app.policies(["limited"]), holder(pid=pid), limit, app.clock.store_now())


def settle_all(app, claims):
    app.store.settle(
        [Settlement(c.job.id, c.token, "done", result="0") for c in claims], app.clock.store_now()
    )


def running_by_group(app) -> Counter:
    return Counter(j.group for j in app.jobs(state="running", queue="limited", limit=10_000))


def hammer(app, check, claimers: int = 6, rounds: int = 15) -> int:
    """Claimers claim and settle at once, each checking the store's own count of running jobs
    after every claim; returns how many jobs ran."""
    barrier, errors, ran = threading.Barrier(claimers), [], []

    def claimer(pid: int) -> None:
        barrier.wait()
        for _ in range(rounds):
            try:
                claims = claim(app, 3, pid=pid)
                problem = check(running_by_group(app))
                if problem:
                    errors.append(problem)
                ran.extend(c.job.id for c in claims)
                settle_all(app, claims)
            except Exception as err:  # reported below, not lost in a thread
                errors.append(repr(err))

    threads = [threading.Thread(target=claimer, args=(pid,)) for pid in range(claimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(ran) == len(set(ran))
    return len(ran)


def test_lim01_concurrency_holds_across_claimers_at_once(app):
    app.queue("limited", concurrency=2)
    app.enqueue_many([("work", {"n": i}) for i in range(40)])
    ran = hammer(app, lambda running: sum(running.values()) > 2 and f"running {dict(running)}")
    assert ran > 0


def test_lim01_group_concurrency_holds_across_claimers_at_once(app):
    app.queue("limited", group_concurrency=1)
    app.enqueue_many([("work", {"n": i}) for i in range(10)], group="a")
    app.enqueue_many([("work", {"n": i}) for i in range(10)], group="b")

    def check(running: Counter) -> str | None:
        over = {g: n for g, n in running.items() if n > 1}
        return f"groups over their limit: {over}" if over else None

    assert hammer(app, check) > 0


def test_lim01_a_full_queue_claims_nothing_more_until_a_lease_ends(app):
    app.queue("limited", concurrency=2)
    app.enqueue_many([("work", {"n": i}) for i in range(4)])
    first = claim(app, 10, pid=1)
    assert len(first) == 2
    assert claim(app, 10, pid=2) == []
    assert {j.attempts for j in app.jobs(state="waiting")} == {0}  # held back, not counted
    settle_all(app, first[:1])
    assert len(claim(app, 10, pid=2)) == 1


def test_lim02_rate_per_minute_is_exact_in_every_window(app, clock):
    app.queue("limited", rate="10/m")
    app.enqueue_many([("work", {"n": i}) for i in range(25)])
    assert app.drain() == 10
    clock.advance(59.9)
    assert app.drain() == 0
    clock.advance(0.1)
    assert app.drain() == 10
    clock.advance(60)
    assert app.drain() == 5


def test_lim02_rate_per_second_with_starts_spread_over_the_window(app, clock):
    app.queue("limited", rate="4/s")
    app.enqueue_many([("work", {"n": i}) for i in range(10)])
    starts = []
    for _ in range(40):  # every 0.1 s, claim what the window allows
        starts += [clock.now()] * app.drain()
        clock.advance(0.1)
    assert len(starts) == 10
    for start in starts:  # any window of one second holds at most four starts
        assert sum(1 for s in starts if start <= s < start + 1.0 - 1e-9) <= 4


def test_lim02_group_rate_bounds_each_group(app, clock):
    app.queue("limited", group_rate="2/h")
    app.enqueue_many([("work", {"n": i}) for i in range(5)], group="customer:7")
    app.enqueue_many([("work", {"n": i}) for i in range(5)], group="customer:8")
    app.enqueue("work", {"n": 99})  # no group: not group-limited
    assert app.drain() == 5
    clock.advance("59m")
    assert app.drain() == 0
    clock.advance("1m")
    assert app.drain() == 4
    assert Counter(j.group for j in app.jobs(state="done")) == {"customer:7": 4, "customer:8": 4, None: 1}


def test_lim03_a_full_group_is_set_aside_and_claimed_as_soon_as_it_has_room(app):
    app.queue("limited", group_concurrency=1)
    a1 = app.enqueue("work", {"n": 1}, group="a")
    a2 = app.enqueue("work", {"n": 2}, group="a")
    b1 = app.enqueue("work", {"n": 3}, group="b")
    held = claim(app, 1, pid=1)
    assert [c.job.id for c in held] == [a1.id]
    # a is full: a2 is passed over, b1 behind it runs; a2 keeps its attempts.
    assert [c.job.id for c in claim(app, 1, pid=2)] == [b1.id]
    assert claim(app, 10, pid=2) == []
    assert app.get(a2.id).attempts == 0
    settle_all(app, held)
    assert [c.job.id for c in claim(app, 10, pid=3)] == [a2.id]


def test_lim03_a_full_group_does_not_block_other_queues(app):
    @app.task(queue="free")
    def other(run):
        return None

    app.queue("limited", group_concurrency=1)
    app.enqueue("work", {"n": 1}, group="a")
    app.enqueue("work", {"n": 2}, group="a")
    app.enqueue("other")
    both = app.policies(["limited", "free"])
    first = app.store.claim(both, holder(pid=1), 10, app.clock.store_now())
    assert sorted(c.job.task for c in first) == ["other", "work"]
    assert app.store.claim(both, holder(pid=2), 10, app.clock.store_now()) == []


def test_lim02_rate_holds_for_claimers_at_once_on_the_stores_own_clock(store):
    """now=None: each claim reads the store's clock. A claimer that read its clock before it
    waited for another's claim must still count that claim's start (LIM-02, CLK-01)."""
    store.enqueue([NewJob(id=f"j{i}", task="work", queue="limited") for i in range(2000)])
    policies = {"limited": QueuePolicy("limited", rate=(3, 0.1))}
    starts: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + 2.0

    def claimer(pid: int) -> None:
        while time.monotonic() < stop:
            for claimed in store.claim(policies, holder(pid=pid), 1):
                with lock:
                    starts.append(claimed.job.started_at)
                store.settle([Settlement(claimed.job.id, claimed.token, "done", result="1")])

    threads = [threading.Thread(target=claimer, args=(pid,)) for pid in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    starts.sort()
    worst = max(sum(1 for u in starts if t <= u < t + 0.1) for t in starts)
    assert len(starts) >= 3 and worst <= 3, f"{worst} starts in one 0.1 s window (rate 3/0.1s)"
