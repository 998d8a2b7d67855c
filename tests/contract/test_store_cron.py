"""Cron firing (CRON-01, store part), leadership leases, listing and counting, and `wait`."""

from __future__ import annotations

import threading
import time

from helpers import T0, add, claim, claim_one, ids, new, queues, settle

SCHEDULE = "sweep:*/5 * * * *"


def _cron_job(due: float):
    return new(f"cron:sweep:{int(due)}", task="sweep")


def test_cron01_fires_once_per_due_time(store):
    assert store.cron_last(SCHEDULE) is None
    assert store.fire_cron(SCHEDULE, T0, _cron_job(T0), now=T0) is True
    assert store.fire_cron(SCHEDULE, T0, _cron_job(T0), now=T0 + 1) is False
    assert store.cron_last(SCHEDULE) == T0
    assert ids(store.jobs(now=T0 + 1)) == [f"cron:sweep:{int(T0)}"]


def test_cron01_later_due_times_fire_earlier_ones_never(store):
    assert store.fire_cron(SCHEDULE, T0, _cron_job(T0), now=T0)
    assert store.fire_cron(SCHEDULE, T0 - 300, _cron_job(T0 - 300), now=T0 + 1) is False
    assert store.fire_cron(SCHEDULE, T0 + 300, _cron_job(T0 + 300), now=T0 + 301) is True
    assert store.cron_last(SCHEDULE) == T0 + 300
    assert store.fire_cron(SCHEDULE, T0 + 300, _cron_job(T0 + 300), now=T0 + 302) is False
    assert sorted(ids(store.jobs(now=T0 + 302))) == [
        f"cron:sweep:{int(T0)}",
        f"cron:sweep:{int(T0 + 300)}",
    ]


def test_cron01_fired_job_is_an_ordinary_job(store):
    job = new("cron:report", task="report", queue="reports", payload='{"due":1}')
    assert store.fire_cron("report", T0, job, now=T0)
    fired = store.get("cron:report", now=T0)
    assert (fired.task, fired.queue, fired.args, fired.state) == (
        "report",
        "reports",
        {"due": 1},
        "waiting",
    )


def test_cron01_schedules_are_independent(store):
    assert store.fire_cron("a", T0, new("a1"), now=T0)
    assert store.fire_cron("b", T0, new("b1"), now=T0)
    assert store.fire_cron("b", T0 - 1, new("b0"), now=T0) is False
    assert (store.cron_last("a"), store.cron_last("b")) == (T0, T0)


def test_cron01_concurrent_firing_fires_exactly_once(store):
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def fire() -> None:
        barrier.wait()
        results.append(store.fire_cron(SCHEDULE, T0, _cron_job(T0), now=T0))

    threads = [threading.Thread(target=fire) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == [False] * 7 + [True]
    assert len(store.jobs(now=T0)) == 1


def test_leadership_is_held_by_one_holder_until_it_expires(store):
    assert store.lead("reaper", "sup-a", 10, now=T0) is True
    assert store.lead("reaper", "sup-b", 10, now=T0 + 1) is False
    assert store.lead("reaper", "sup-a", 10, now=T0 + 5) is True  # renewed until T0 + 15
    assert store.lead("reaper", "sup-b", 10, now=T0 + 14.9) is False
    assert store.lead("reaper", "sup-b", 10, now=T0 + 15) is True
    assert store.lead("reaper", "sup-a", 10, now=T0 + 16) is False
    assert store.lead("cron", "sup-a", 10, now=T0 + 16) is True  # another name, another lease


def test_leadership_resign_frees_it_only_for_its_holder(store):
    assert store.lead("reaper", "sup-a", 60, now=T0)
    store.resign("reaper", "sup-b")
    assert store.lead("reaper", "sup-b", 60, now=T0 + 1) is False
    store.resign("reaper", "sup-a")
    assert store.lead("reaper", "sup-b", 60, now=T0 + 2) is True


def test_jobs_lists_by_reported_state_and_queue_oldest_first(store):
    add(store, "w1", "w2")
    add(store, "s1", delay=100)
    store.enqueue([new("m1", queue="mail")], now=T0)
    add(store, "r1", "f1", now=T0 + 1)
    both = queues("default", "mail")
    running = {c.job.id: c for c in claim(store, 10, now=T0 + 1, on=both)}
    assert settle(store, running["f1"], "fail", now=T0 + 2, error="bad")
    add(store, "w3", now=T0 + 3)
    assert ids(store.jobs(now=T0 + 3)) == ["w1", "w2", "s1", "m1", "r1", "f1", "w3"]
    assert ids(store.jobs(state="scheduled", now=T0 + 3)) == ["s1"]
    assert ids(store.jobs(state="waiting", now=T0 + 3)) == ["w3"]
    assert ids(store.jobs(state="running", now=T0 + 3)) == ["w1", "w2", "m1", "r1"]
    assert ids(store.jobs(state="running", queue="mail", now=T0 + 3)) == ["m1"]
    assert ids(store.jobs(state="failed", now=T0 + 3)) == ["f1"]
    assert ids(store.jobs(limit=2, now=T0 + 3)) == ["w1", "w2"]
    assert ids(store.jobs(state="waiting", now=T0 + 200)) == ["s1", "w3"]


def test_counts_by_queue_and_reported_state(store):
    add(store, "a", "b", "c")
    add(store, "later", delay=60)
    store.enqueue([new("m", queue="mail"), new("blocked", queue="mail", after=("a",))], now=T0)
    done = claim_one(store)
    assert settle(store, done, "done", now=T0 + 1, result="1")
    assert store.counts(now=T0 + 1) == {
        "default": {"done": 1, "waiting": 2, "scheduled": 1},
        "mail": {"waiting": 2},
    }


def test_wait_wakes_on_a_change(store):
    woke: list[bool] = []
    started = time.monotonic()
    waiter = threading.Thread(target=lambda: woke.append(store.wait(["default"], 20.0)))
    waiter.start()
    n = 0
    while waiter.is_alive() and time.monotonic() - started < 15:
        add(store, f"job-{n}", now=time.time())
        n += 1
        waiter.join(0.05)
    waiter.join(20)
    assert woke == [True]
    assert time.monotonic() - started < 15
