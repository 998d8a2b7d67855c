"""LIM-04: pausing a queue, on every store. Each point of the contract has its test:
no claim takes a paused queue's jobs from the moment `pause` returns (whatever the claim's
limits), running jobs finish, `resume` makes them claimable at once and wakes waiting workers,
and the paused state is stored (another handle on the same store, opened later, sees it)."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import T0, add, claim, claim_one, holder, ids, policy, queues, settle

from tinyjobs.errors import ConfigError
from tinyjobs.stores import open_store


def test_lim04_no_claim_takes_a_paused_queues_jobs(store):
    add(store, "m1", "m2", queue="mail")
    add(store, "d1")
    store.pause("mail")
    assert ids(claim(store, 10, on=queues("mail", "default"))) == ["d1"]
    assert claim(store, 10, on=queues("mail"), now=T0 + 3600) == []


def test_lim04_a_paused_queue_with_limits_is_not_claimed_either(store):
    add(store, "m1", "m2", queue="mail", group="g")
    store.pause("mail")
    on = queues(policy("mail", concurrency=5, rate=(10, 60.0), group_concurrency=1))
    assert claim(store, 10, on=on) == []
    assert claim(store, 10, on=on, now=T0 + 1) == []


def test_lim04_pausing_touches_no_other_queue(store):
    add(store, "a", queue="mail")
    add(store, "b", queue="mailer")  # a name that starts like the paused one
    store.pause("mail")
    assert ids(claim(store, 10, on=queues("mail", "mailer"))) == ["b"]


def test_lim04_running_jobs_of_a_paused_queue_finish(store):
    add(store, "a", "b", queue="mail")
    running = claim_one(store, on=queues("mail"))
    store.pause("mail")
    assert store.renew([running.token], now=T0 + 10) == {running.token: "ok"}
    assert store.save_step(running.token, "s", "1", now=T0 + 10)
    assert settle(store, running, "done", now=T0 + 11)
    assert store.get("a", now=T0 + 11).state == "done"
    assert claim(store, 10, on=queues("mail"), now=T0 + 12) == []  # b still waits


def test_lim04_resume_makes_the_jobs_claimable_at_once(store):
    add(store, "a", "b", queue="mail")
    store.pause("mail")
    assert claim(store, 10, on=queues("mail")) == []
    store.resume("mail")
    assert ids(claim(store, 10, on=queues("mail"))) == ["a", "b"]


def test_lim04_a_retried_job_of_a_paused_queue_waits_for_resume(store):
    add(store, "a", queue="mail")
    running = claim_one(store, on=queues("mail"))
    store.pause("mail")
    settle(store, running, "retry", error="again", delay=0, now=T0 + 1)
    assert store.get("a", now=T0 + 2).state == "waiting"
    assert claim(store, 10, on=queues("mail"), now=T0 + 2) == []
    store.resume("mail")
    assert ids(claim(store, 10, on=queues("mail"), now=T0 + 3)) == ["a"]


def test_lim04_paused_lists_the_paused_queues_and_pause_twice_is_once(store):
    assert store.paused() == set()
    store.pause("mail")
    store.pause("mail")
    store.pause("reports")
    assert store.paused() == {"mail", "reports"}
    store.resume("mail")
    assert store.paused() == {"reports"}
    store.resume("mail")  # resuming a running queue changes nothing
    store.resume("never-paused")
    assert store.paused() == {"reports"}
    assert [(s.name, s.paused) for s in store.queue_stats(now=T0)] == [("reports", True)]


def test_lim04_a_queue_name_must_be_given(store):
    with pytest.raises(ConfigError, match="queue name"):
        store.pause("")


def test_lim04_resume_wakes_a_waiting_worker(store):
    store.pause("mail")
    add(store, "a", queue="mail", now=time.time())
    ready, woke = threading.Event(), threading.Event()

    def waiter() -> None:
        store.wait(["mail"], 0)  # a first look, so a change from here on counts for this thread
        ready.set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            store.wait(["mail"], 5.0)  # spurious wake-ups are allowed: look whether it resumed
            if "mail" not in store.paused():
                woke.set()
                return

    thread = threading.Thread(target=waiter)
    thread.start()
    assert ready.wait(10)
    started = time.monotonic()
    store.resume("mail")
    thread.join(10)
    # Well under the 5 s wait: the resume itself woke the waiter.
    assert woke.is_set() and time.monotonic() - started < 3.0


@pytest.mark.requires("shared")
def test_lim04_the_paused_state_is_stored(store):
    add(store, "a", queue="mail")
    store.pause("mail")
    other = open_store(store.url)
    try:
        assert other.paused() == {"mail"}
        assert other.claim(queues("mail"), holder(), 10, now=T0) == []
        other.resume("mail")
        assert store.paused() == set()
    finally:
        other.close()
