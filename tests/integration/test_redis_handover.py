"""The Redis store's handover: a single enqueue leases its job to a waiting worker (registered
by its claim that found nothing), whose wait() pops the job and whose next claim returns it
without a round trip; a job handed over and never popped is given back whole (no attempt, no
execution) when its holder's leases end or its lease expires, one popped and not started is given
back whole by its worker when it stops (give_back_unstarted), and one popped and lost is on record
like any claimed job."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from support.wait import wait_until

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement

QUEUES = {"default": QueuePolicy("default", lease=30.0)}


def raw(store) -> redis.Redis:
    return redis.Redis.from_url(store.url.split("?", 1)[0], decode_responses=True)


def registered(store, queue: str = "default") -> dict[str, str]:
    return raw(store).hgetall(f"{store.base}:q:{queue}:idle")


class Waiter:
    """store.wait() on a thread of its own, as a worker's store watcher calls it."""

    def __init__(self, store, queues=("default",), timeout: float = 10.0) -> None:
        self.result: bool | None = None
        self.thread = threading.Thread(target=self._run, args=(store, list(queues), timeout), daemon=True)
        self.thread.start()

    def _run(self, store, queues, timeout) -> None:
        self.result = store.wait(queues, timeout)

    def join(self) -> bool | None:
        self.thread.join(15)
        return self.result


def wait_registered(store, holder: Holder, queue: str = "default") -> None:
    wait_until(lambda: holder.id in registered(store, queue), timeout=10)


def become_idle(store, queues=QUEUES) -> Holder:
    """What a worker does: a claim, a wait on its queues, then a claim that finds nothing (which
    registers it: only once it has waited, and only for queues that hold jobs)."""
    holder = Holder.current()
    store.enqueue([NewJob("seed", "work")], now=store.now())  # its queue exists; no handover
    [seed] = store.claim(queues, holder, 8)
    store.settle([Settlement("seed", seed.token, "done")])
    store.wait(list(queues), 0.05)  # (pops the seed's wake-up)
    assert store.claim(queues, holder, 8) == []
    return holder


def handed_over(store, queues=QUEUES) -> tuple[Holder, Waiter]:
    """A registered waiting worker, waiting."""
    holder = become_idle(store, queues)
    wait_registered(store, holder, next(iter(queues)))
    return holder, Waiter(store, queues)


def handed_a_job(store, popped: bool) -> Holder:
    """A job "a" (one attempt at most) handed over to a registered worker: popped by its wait()
    or, when not `popped`, left on its list (its wait() never came)."""
    if popped:
        holder, waiter = handed_over(store)
    else:
        holder = become_idle(store)
        wait_registered(store, holder)
    store.enqueue([NewJob("a", "work", max_attempts=1)])
    if popped:
        assert waiter.join() is True
    else:
        assert store.get("a").state == "running"
    return holder


def test_a_single_enqueue_hands_its_job_to_a_waiting_worker(redis_store):
    holder, waiter = handed_over(redis_store)
    started = time.monotonic()
    [job] = redis_store.enqueue([NewJob("a", "work", payload='{"x": 1}')])
    assert job.state == "waiting"  # so it was, within the enqueue's atomic step
    assert waiter.join() is True
    assert time.monotonic() - started < 5
    assert redis_store.get("a").state == "running"
    assert registered(redis_store) == {}  # used up
    r = raw(redis_store)
    assert not r.exists(f"{redis_store.base}:hand:{holder.id}")  # popped: the worker's now
    assert not r.exists(f"{redis_store.base}:handed:{holder.id}")  # no mark to remove (the layout before)
    [claimed] = redis_store.claim(QUEUES, holder, 8)
    assert claimed.job.id == "a" and claimed.job.args == {"x": 1} and claimed.job.attempts == 1
    assert claimed.job.state == "running" and claimed.job.started_at is not None
    assert claimed.lease == 30.0 and claimed.token.endswith("-a")
    assert redis_store.claim(QUEUES, holder, 8) == []  # taken once
    assert redis_store.renew([claimed.token])[claimed.token] == "ok"
    assert redis_store.settle([Settlement("a", claimed.token, "done", result="7")]) == [True]
    done = redis_store.get("a", executions=True)
    assert done.state == "done" and done.result == 7 and done.attempts == 1
    [execution] = done.executions
    assert execution.attempt == 1 and execution.outcome == "done"
    assert redis_store.counts()["default"]["done"] == 2


@pytest.mark.parametrize("popped", [True, False])
def test_a_job_handed_over_and_never_taken_is_given_back_whole_when_its_holder_ends(redis_store, popped):
    """A job no claim took never started: popped by wait(), its worker gives it back as it
    stops (give_back_unstarted: a worker that stops between its pop and its claim); never
    popped, ending its holder's leases does (a worker that died before its pop)."""
    holder = handed_a_job(redis_store, popped)
    assert redis_store.holders(holder.host) == [holder]
    if popped:
        assert redis_store.give_back_unstarted(holder) == 1
        assert redis_store.give_back_unstarted(holder) == 0  # once
        assert redis_store.end_leases([holder]) == 0
    else:
        assert redis_store.end_leases([holder]) == 1
    back = redis_store.get("a", executions=True)
    assert back.state == "waiting" and back.attempts == 0 and back.executions == []
    other = Holder("other-host", 1, 1)
    [claimed] = redis_store.claim(QUEUES, other, 8)
    assert claimed.job.attempts == 1
    assert redis_store.settle([Settlement("a", claimed.token, "done")]) == [True]
    assert [e.outcome for e in redis_store.get("a", executions=True).executions] == ["done"]
    r = raw(redis_store)
    assert not r.exists(f"{redis_store.base}:handed:{holder.id}", f"{redis_store.base}:hand:{holder.id}")


@pytest.mark.parametrize("popped", [True, False])
def test_a_job_handed_over_and_never_taken_is_given_back_whole_when_its_lease_expires(redis_store, popped):
    holder = handed_a_job(redis_store, popped)
    if popped:
        assert redis_store.give_back_unstarted(holder) == 1  # its worker stopped
    assert redis_store.reap(now=redis_store.now() + 31) == (0 if popped else 1)
    # Never popped, it is off the holder's list too: its wait() will not get it later.
    assert not raw(redis_store).exists(f"{redis_store.base}:hand:{holder.id}")
    back = redis_store.get("a", executions=True)
    assert back.state == "waiting" and back.attempts == 0 and back.executions == []
    [again] = redis_store.claim(QUEUES, Holder("other-host", 1, 1), 8)
    assert again.job.attempts == 1


def test_a_handed_job_taken_then_lost_ends_worker_lost_on_record(redis_store):
    holder, waiter = handed_over(redis_store)
    redis_store.enqueue([NewJob("a", "work", max_attempts=2)])
    assert waiter.join() is True
    [claimed] = redis_store.claim(QUEUES, holder, 8)
    assert redis_store.end_leases([holder]) == 1
    back = redis_store.get("a", executions=True)
    assert back.state == "waiting" and back.attempts == 1
    assert [e.outcome for e in back.executions] == ["worker lost"]


def test_a_popped_job_its_worker_died_with_ends_worker_lost_on_record(redis_store):
    """Popped is taken: a worker that died between its pop and its claim (no give-back) leaves
    an attempt on record, as any job a claim gave a worker that died (not a lost job)."""
    holder = handed_a_job(redis_store, popped=True)
    assert redis_store.end_leases([holder]) == 1
    back = redis_store.get("a", executions=True)
    assert back.state == "failed" and back.attempts == 1  # max_attempts=1
    assert [e.outcome for e in back.executions] == ["worker lost"]


def test_a_stopped_worker_is_handed_nothing_more(redis_store):
    """give_back_unstarted removes the holder's registrations, and its claims register it no
    more: a single enqueue after it leaves the job waiting for any claim."""
    holder = become_idle(redis_store)
    wait_registered(redis_store, holder)
    assert redis_store.give_back_unstarted(holder) == 0
    assert registered(redis_store) == {}
    assert redis_store.claim(QUEUES, holder, 8) == []
    assert registered(redis_store) == {}
    redis_store.enqueue([NewJob("a", "work")])
    assert redis_store.get("a").state == "waiting"


def test_a_job_popped_as_its_worker_stops_is_given_back_by_that_wait(redis_store):
    """A wait() blocked when its worker stopped may still pop a job handed over just before:
    it gives that job back itself (the worker's give-back has run)."""
    holder, waiter = handed_over(redis_store)
    r = raw(redis_store)
    db = str(r.connection_pool.connection_kwargs.get("db", 0))

    def blocked() -> bool:  # its wait() is in its blocking pop, the holder's list among its keys
        return any(c["cmd"] == "blpop" and c["db"] == db and "b" in c["flags"] for c in r.client_list())

    wait_until(blocked, timeout=10)
    [claimer] = [c for c in redis_store._claimers.values() if c is not None]
    claimer.stopped = True  # its give-back ran while this wait() was blocked
    redis_store.enqueue([NewJob("a", "work")])  # handed over (the registration was still there)
    assert waiter.join() is True
    back = redis_store.get("a", executions=True)
    assert back.state == "waiting" and back.attempts == 0 and back.executions == []
    assert claimer.stash == [] and registered(redis_store) == {}


def test_no_handover_past_a_job_already_due(redis_store):
    """The handed job must be the one a claim would take first: not while others are due."""
    holder = become_idle(redis_store)
    redis_store.enqueue([NewJob("first", "work", priority=0)], now=redis_store.now())  # no handover
    wait_registered(redis_store, holder)
    redis_store.enqueue([NewJob("second", "work", priority=5)])
    assert redis_store.get("second").state == "waiting"
    assert [c.job.id for c in redis_store.claim(QUEUES, holder, 1)] == ["second"]
    assert [c.job.id for c in redis_store.claim(QUEUES, holder, 1)] == ["first"]


@pytest.mark.parametrize("case", ["paused", "limited", "store clock", "expired", "full"])
def test_no_handover(redis_store, case):
    queues = QUEUES
    if case == "limited":
        queues = {"default": QueuePolicy("default", lease=30.0, concurrency=4)}
    holder = become_idle(redis_store, queues)
    if case == "limited":
        assert registered(redis_store) == {}  # a limited queue registers nobody
    else:
        wait_registered(redis_store, holder)
    if case == "paused":
        redis_store.pause("default")
    if case == "expired":
        r = raw(redis_store)
        key = f"{redis_store.base}:q:default:idle"
        value = r.hget(key, holder.id)
        r.hset(key, holder.id, str(redis_store.now() - 1) + value[value.index("\t") :])
    if case == "full":
        redis_store.enqueue([NewJob("one", "work")], now=redis_store.now())
        assert len(redis_store.claim(queues, holder, 1)) == 1  # fills the worker: unregistered
        assert registered(redis_store) == {}
    now = redis_store.now() if case == "store clock" else None
    redis_store.enqueue([NewJob("a", "work")], now=now)
    assert redis_store.get("a").state == "waiting"
    if case == "paused":
        redis_store.resume("default")
    assert [c.job.attempts for c in redis_store.claim(queues, holder, 8)] == [1]


def test_no_registration_without_a_wait_nor_for_a_second_holder(redis_store):
    holder = Holder.current()
    redis_store.enqueue([NewJob("seed", "work")], now=redis_store.now())
    [seed] = redis_store.claim(QUEUES, holder, 8)
    redis_store.settle([Settlement("seed", seed.token, "done")])
    assert redis_store.claim(QUEUES, holder, 8) == []
    assert registered(redis_store) == {}  # it never waited here
    redis_store.wait(["default"], 0.05)
    redis_store.claim(QUEUES, Holder("elsewhere", 2, 2), 8)
    assert redis_store.claim(QUEUES, holder, 8) == []
    assert registered(redis_store) == {}


def test_purge_forgets_registrations_with_their_queue(redis_store):
    holder = become_idle(redis_store)
    wait_registered(redis_store, holder)
    assert redis_store.purge(now=redis_store.now() + 10**7) == 1
    assert not raw(redis_store).exists(f"{redis_store.base}:q:default:idle")


SHORT = {"default": QueuePolicy("default", lease=1.0)}


def test_a_popped_job_given_back_before_its_claim_is_not_started_on_the_lease_it_lost(redis_store):
    """A job popped by wait() whose handed lease the reaper gave back before the holder's claim
    took it waits again: the claim must not return the handed lease (a job given back would run
    on a lease that is gone, beside the worker that claims it next); it claims the job afresh."""
    holder, waiter = handed_over(redis_store, SHORT)
    redis_store.enqueue([NewJob("a", "work")])
    assert waiter.join() is True
    handed_token = raw(redis_store).hget(f"{redis_store.base}:job:a", "tk")
    assert redis_store.reap(now=redis_store.now() + 2) == 1  # given back: never taken
    assert redis_store.get("a").state == "waiting"
    [claimed] = redis_store.claim(SHORT, holder, 8)
    assert claimed.job.id == "a" and claimed.token != handed_token  # a lease of its own
    assert redis_store.get("a").state == "running"
    assert redis_store.renew([claimed.token])[claimed.token] == "ok"


def test_a_popped_job_whose_lease_is_near_its_end_is_still_taken_when_it_was_not_given_back(redis_store):
    holder, waiter = handed_over(redis_store, SHORT)
    redis_store.enqueue([NewJob("a", "work")])
    assert waiter.join() is True
    [claimed] = redis_store.claim(SHORT, holder, 8)
    assert claimed.job.id == "a" and claimed.lease == 1.0
    assert not raw(redis_store).exists(f"{redis_store.base}:handed:{holder.id}")  # taken
    assert redis_store.renew([claimed.token])[claimed.token] == "ok"


def as_older_version_handed_it(store, holder: Holder, waiter: Waiter) -> str:
    """The job wait() popped, made as an older version's enqueue handed it over: its entry with
    [] for the fields written, and its mark in P:handed:<holder> (the layout before)."""
    import json

    assert waiter.join() is True
    [claimer] = [c for c in store._claimers.values() if c is not None]
    job_id, flat, _written, steps = json.loads(claimer.stash[0])
    claimer.stash[0] = json.dumps([job_id, flat, [], steps])
    raw(store).hset(f"{store.base}:handed:{holder.id}", job_id, claimer.stash[0])
    return job_id


def test_a_job_an_older_version_handed_over_is_taken_with_its_mark_removed(redis_store):
    holder, waiter = handed_over(redis_store)
    redis_store.enqueue([NewJob("a", "work")])
    as_older_version_handed_it(redis_store, holder, waiter)
    [claimed] = redis_store.claim(QUEUES, holder, 8)
    assert claimed.job.id == "a"
    wait_until(lambda: not raw(redis_store).exists(f"{redis_store.base}:handed:{holder.id}"), timeout=10)
    assert redis_store.end_leases([holder]) == 1
    assert [e.outcome for e in redis_store.get("a", executions=True).executions] == ["worker lost"]


@pytest.mark.parametrize("ending", ["end_leases", "reap"])
def test_a_job_an_older_version_handed_over_and_no_claim_took_is_given_back_whole(redis_store, ending):
    holder, waiter = handed_over(redis_store)
    redis_store.enqueue([NewJob("a", "work", max_attempts=1)])
    as_older_version_handed_it(redis_store, holder, waiter)
    if ending == "end_leases":
        assert redis_store.end_leases([holder]) == 1
    else:
        assert redis_store.reap(now=redis_store.now() + 31) == 1
    back = redis_store.get("a", executions=True)
    assert back.state == "waiting" and back.attempts == 0 and back.executions == []
    assert not raw(redis_store).hexists(f"{redis_store.base}:handed:{holder.id}", "a")
