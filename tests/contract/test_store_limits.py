"""Queue and group limits, counted by the store in the claim itself: LIM-01 (concurrency),
LIM-02 (rates over a moving window), LIM-03 (a full group is set aside, not blocking)."""

from __future__ import annotations

from helpers import LEASE, T0, add, claim, holder, ids, new, policy, queues, settle


def test_lim01_concurrency_caps_one_claim(store):
    add(store, "a", "b", "c", "d", "e")
    limited = queues(policy(concurrency=2))
    assert ids(claim(store, 10, on=limited)) == ["a", "b"]


def test_lim01_concurrency_holds_across_holders_and_frees_on_settlement(store):
    add(store, "a", "b", "c", "d")
    limited = queues(policy(concurrency=2))
    first = claim(store, 1, on=limited, by=holder(pid=1))
    second = claim(store, 10, on=limited, by=holder(pid=2))
    assert ids(first) + ids(second) == ["a", "b"]
    assert claim(store, 10, on=limited, by=holder(pid=3)) == []
    assert settle(store, first[0], "done", now=T0 + 1, result="1")
    assert ids(claim(store, 10, now=T0 + 1, on=limited, by=holder(pid=3))) == ["c"]
    assert claim(store, 10, now=T0 + 1, on=limited, by=holder(pid=1)) == []


def test_lim01_reaped_lease_frees_its_place(store):
    add(store, "a", "b")
    limited = queues(policy(concurrency=1))
    assert ids(claim(store, 10, on=limited)) == ["a"]
    assert claim(store, 10, now=T0 + LEASE - 1, on=limited) == []
    assert store.reap(now=T0 + LEASE) == 1
    assert ids(claim(store, 10, now=T0 + LEASE, on=limited)) == ["a"]


def test_lim01_concurrency_is_per_queue(store):
    store.enqueue([new(f"m{i}", queue="mail") for i in range(3)], now=T0)
    store.enqueue([new(f"s{i}", queue="sms") for i in range(3)], now=T0)
    both = queues(policy("mail", concurrency=1), policy("sms", concurrency=2))
    assert sorted(ids(claim(store, 10, on=both))) == ["m0", "s0", "s1"]


def test_lim01_group_concurrency_caps_each_group(store):
    store.enqueue(
        [new("g1-a", group="g1"), new("g1-b", group="g1"), new("g2-a", group="g2")]
        + [new("g2-b", group="g2"), new("free-a"), new("free-b")],
        now=T0,
    )
    limited = queues(policy(group_concurrency=1))
    assert ids(claim(store, 10, on=limited, by=holder(pid=1))) == [
        "g1-a",
        "g2-a",
        "free-a",
        "free-b",
    ]
    assert claim(store, 10, on=limited, by=holder(pid=2)) == []


def test_lim01_group_is_counted_within_its_queue(store):
    store.enqueue([new("m1", queue="mail", group="c7"), new("m2", queue="mail", group="c7")], now=T0)
    store.enqueue([new("s1", queue="sms", group="c7"), new("s2", queue="sms", group="c7")], now=T0)
    both = queues(policy("mail", group_concurrency=1), policy("sms", group_concurrency=1))
    assert sorted(ids(claim(store, 10, on=both))) == ["m1", "s1"]


def test_lim01_queue_and_group_caps_together(store):
    store.enqueue([new(f"g1-{i}", group="g1") for i in range(3)], now=T0)
    store.enqueue([new(f"g2-{i}", group="g2") for i in range(3)], now=T0)
    limited = queues(policy(concurrency=3, group_concurrency=2))
    assert ids(claim(store, 10, on=limited)) == ["g1-0", "g1-1", "g2-0"]


def test_lim02_rate_bounds_starts_in_any_window(store):
    add(store, *[f"j{i}" for i in range(6)])
    limited = queues(policy(rate=(2, 10.0)))
    started = claim(store, 10, now=T0, on=limited, by=holder(pid=1))
    assert ids(started) == ["j0", "j1"]
    for claimed in started:  # settled at once: the starts still count within the window
        assert settle(store, claimed, "done", now=T0 + 1, result="1")
    assert claim(store, 10, now=T0 + 5, on=limited, by=holder(pid=2)) == []
    assert claim(store, 10, now=T0 + 9.9, on=limited, by=holder(pid=1)) == []
    assert ids(claim(store, 10, now=T0 + 10, on=limited, by=holder(pid=2))) == ["j2", "j3"]
    assert claim(store, 10, now=T0 + 15, on=limited) == []


def test_lim02_rate_window_slides(store):
    add(store, *[f"j{i}" for i in range(5)])
    limited = queues(policy(rate=(2, 10.0)))
    assert ids(claim(store, 1, now=T0, on=limited)) == ["j0"]
    assert ids(claim(store, 10, now=T0 + 6, on=limited)) == ["j1"]
    assert ids(claim(store, 10, now=T0 + 10, on=limited)) == ["j2"]  # j0's start left the window
    assert claim(store, 10, now=T0 + 15.9, on=limited) == []
    assert ids(claim(store, 10, now=T0 + 16, on=limited)) == ["j3"]


def test_lim02_group_rate_bounds_each_group(store):
    store.enqueue([new(f"g1-{i}", group="g1") for i in range(3)], now=T0)
    store.enqueue([new(f"g2-{i}", group="g2") for i in range(3)], now=T0)
    add(store, "free")
    limited = queues(policy(group_rate=(1, 60.0)))
    assert ids(claim(store, 10, now=T0, on=limited)) == ["g1-0", "g2-0", "free"]
    assert claim(store, 10, now=T0 + 59, on=limited, by=holder(pid=2)) == []
    assert ids(claim(store, 10, now=T0 + 60, on=limited, by=holder(pid=2))) == ["g1-1", "g2-1"]


def test_lim02_rate_counts_restarts(store):
    add(store, "a", max_attempts=5)
    limited = queues(policy(rate=(1, 100.0)))
    assert ids(claim(store, 10, now=T0, on=limited)) == ["a"]
    store.end_leases([holder()], now=T0 + 1)
    assert claim(store, 10, now=T0 + 2, on=limited) == []
    assert ids(claim(store, 10, now=T0 + 100, on=limited)) == ["a"]


def test_lim03_full_group_is_set_aside_not_blocking_others(store):
    store.enqueue(
        [new("g1-a", group="g1"), new("g1-b", group="g1"), new("g1-c", group="g1")]
        + [new("g2-a", group="g2")],
        now=T0,
    )
    limited = queues(policy(group_concurrency=1))
    first = claim(store, 1, on=limited, by=holder(pid=1))
    assert ids(first) == ["g1-a"]
    # g1 is full: its next jobs are passed over, and g2's job behind them is taken.
    assert ids(claim(store, 1, on=limited, by=holder(pid=2))) == ["g2-a"]
    assert claim(store, 10, on=limited, by=holder(pid=2)) == []
    # As soon as g1 has room, its next job in order is claimed.
    assert settle(store, first[0], "done", now=T0 + 1, result="1")
    assert ids(claim(store, 10, now=T0 + 1, on=limited, by=holder(pid=3))) == ["g1-b"]


def test_lim03_group_rate_sets_aside_without_blocking(store):
    store.enqueue([new("g1-a", group="g1"), new("g1-b", group="g1")], now=T0)
    store.enqueue([new("g2-a", group="g2")], now=T0 + 1)
    limited = queues(policy(group_rate=(1, 30.0)))
    assert ids(claim(store, 1, now=T0 + 1, on=limited)) == ["g1-a"]
    assert ids(claim(store, 1, now=T0 + 2, on=limited)) == ["g2-a"]
    assert claim(store, 1, now=T0 + 3, on=limited) == []
    assert ids(claim(store, 1, now=T0 + 31, on=limited)) == ["g1-b"]
