"""queue_stats, finished_series, execution_stats, delete and worker heartbeats, on every store."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from helpers import LEASE, T0, add, claim, claim_one, holder, ids, new, queues, settle, state

from tinyjobs.errors import ConfigError
from tinyjobs.stores.base import Settlement, WorkerBeat
from tinyjobs.stores.views import bucket_start


def test_queue_stats_counts_reported_states_and_the_oldest_due_job(store):
    add(store, "w1", now=T0)
    add(store, "w2", now=T0 + 5)
    add(store, "s1", delay=100, now=T0)
    add(store, "r1", "d1", queue="mail", now=T0)
    running = claim(store, 2, now=T0 + 1, on=queues("mail"))
    settle(store, running[1], "done", now=T0 + 2)
    stats = {s.name: s for s in store.queue_stats(now=T0 + 10)}
    assert sorted(stats) == ["default", "mail"]
    assert stats["default"].counts == {"waiting": 2, "scheduled": 1}
    assert stats["default"].oldest_due_at == T0 and stats["default"].paused is False
    assert stats["mail"].counts == {"running": 1, "done": 1}
    assert stats["mail"].oldest_due_at is None
    # Once the scheduled job is due it counts as waiting.
    later = {s.name: s for s in store.queue_stats(now=T0 + 200)}
    assert later["default"].counts == {"waiting": 3}


def test_queue_stats_lists_a_paused_queue_without_jobs(store):
    store.pause("idle")
    assert [(s.name, s.counts, s.paused) for s in store.queue_stats(now=T0)] == [("idle", {}, True)]


def _run(store, job_id: str, start: float, end: float, outcome: str, q: str = "default") -> None:
    add(store, job_id, queue=q, now=start)
    claimed = claim_one(store, now=start, on=queues(q))
    assert claimed.job.id == job_id
    fields = {"error": "no"} if outcome in ("fail", "retry") else {}
    assert settle(store, claimed, outcome, now=end, **fields)


def test_finished_series_counts_ended_executions_per_bucket_and_outcome(store):
    _run(store, "a", T0, T0 + 10, "done")
    _run(store, "b", T0 + 20, T0 + 30, "done")
    _run(store, "c", T0 + 30, T0 + 70, "fail")
    _run(store, "d", T0 + 70, T0 + 130, "done")
    _run(store, "old", T0 - 100, T0 - 50, "done")  # before `since`: left out
    series = store.finished_series(T0, 60, now=T0 + 130)
    assert series == [(T0, "done", 2), (T0 + 60, "failed", 1), (T0 + 120, "done", 1)]
    assert store.finished_series(T0, 60, now=T0 + 100) == series[:2]  # after `now`: left out
    with pytest.raises(ConfigError, match="step"):
        store.finished_series(T0, 0, now=T0)


def test_execution_stats_counts_durations_per_queue_and_outcome(store):
    _run(store, "a", T0, T0 + 0.5, "done")
    _run(store, "b", T0, T0 + 3, "done")
    _run(store, "c", T0, T0 + 20, "done")
    _run(store, "m", T0, T0 + 2, "retry", q="mail")
    stats = {(s.queue, s.outcome): s for s in store.execution_stats([1, 5, 60], now=T0 + 30)}
    assert sorted(stats) == [("default", "done"), ("mail", "error")]
    done = stats[("default", "done")]
    assert done.count == 3 and done.seconds == pytest.approx(23.5) and done.buckets == (1, 2, 3)
    assert stats[("mail", "error")].buckets == (0, 1, 1)
    # A running attempt has not finished: it is not counted.
    add(store, "r", now=T0)
    claim_one(store, now=T0 + 1)
    assert {(s.queue, s.outcome) for s in store.execution_stats([1], now=T0 + 30)} == set(stats)


def test_delete_removes_a_waiting_job_its_steps_and_executions(store):
    add(store, "a", now=T0)
    claimed = claim_one(store, now=T0)
    store.save_step(claimed.token, "s", "1", now=T0)
    settle(store, claimed, "retry", error="again", delay=0, now=T0 + 1)
    assert store.delete("a", now=T0 + 2) is True
    assert store.get("a", now=T0 + 2) is None and store.steps("a") == {}
    assert store.execution_stats([1], now=T0 + 2) == []
    assert store.claim(queues(), holder(), 10, now=T0 + 3) == []
    assert store.delete("a", now=T0 + 3) is False
    # The id can be used again, and the new job has no past.
    [again] = add(store, "a", now=T0 + 4)
    assert again.created and store.get("a", now=T0 + 4, executions=True).executions == []


@pytest.mark.parametrize("final", ["done", "fail"])
def test_delete_removes_a_final_job(store, final):
    _run(store, "a", T0, T0 + 1, final)
    assert store.delete("a", now=T0 + 2) and store.get("a", now=T0 + 2) is None


def test_delete_of_a_running_job_ends_its_lease(store):
    add(store, "a", now=T0)
    claimed = claim_one(store, now=T0)
    assert store.delete("a", now=T0 + 1)
    assert store.renew([claimed.token], now=T0 + 2) == {claimed.token: "lost"}
    assert store.save_step(claimed.token, "s", "1", now=T0 + 2) is False
    assert settle(store, claimed, "done", now=T0 + 3) is False
    assert store.get("a", now=T0 + 3) is None and store.reap(now=T0 + 100) == 0


def test_delete_cancels_blocked_dependents_on_record_with_the_reason(store):
    add(store, "p", now=T0)
    store.enqueue([new("c", after=("p",))], now=T0)
    store.enqueue([new("g", after=("c",))], now=T0)
    assert store.delete("p", now=T0 + 1)
    child = store.get("c", now=T0 + 1)
    assert child.state == "cancelled" and "p" in child.error and "deleted" in child.error
    assert state(store, "g", now=T0 + 1) == "cancelled"


def test_delete_of_a_done_job_leaves_its_dependents_free(store):
    _run(store, "p", T0, T0 + 1, "done")
    store.enqueue([new("c", after=("p",))], now=T0 + 2)
    assert state(store, "c", now=T0 + 2) == "waiting"
    assert store.delete("p", now=T0 + 3)
    assert state(store, "c", now=T0 + 3) == "waiting"


def _beat(pid: int, busy: int = 0, host: str = "web-1") -> WorkerBeat:
    return WorkerBeat(host=host, pid=pid, queues=("default", "mail"), slots=8, busy=busy, started_at=T0 - 60)


def test_workers_lists_live_then_lost_then_drops_silent_ones(store):
    store.beat(_beat(10, busy=3), now=T0)
    store.beat(_beat(11, host="web-0"), now=T0 + 20)
    live = store.workers(within=15, now=T0 + 10)
    assert [(w.host, w.pid, w.lost) for w in live] == [("web-0", 11, False), ("web-1", 10, False)]
    assert live[1] == WorkerBeat("web-1", 10, ("default", "mail"), 8, 3, T0 - 60, seen_at=T0)
    assert [(w.pid, w.lost) for w in store.workers(within=15, now=T0 + 30)] == [(11, False), (10, True)]
    assert [(w.pid, w.lost) for w in store.workers(within=15, now=T0 + 151)] == [(11, True)]
    store.beat(_beat(10, busy=1), now=T0 + 160)  # a dropped worker that beats again is back
    assert [(w.pid, w.busy, w.lost) for w in store.workers(within=15, now=T0 + 160)] == [
        (11, 0, True),
        (10, 1, False),
    ]


def test_beat_replaces_the_workers_last_beat(store):
    store.beat(_beat(10, busy=1), now=T0)
    store.beat(_beat(10, busy=5), now=T0 + 3)
    [worker] = store.workers(within=15, now=T0 + 4)
    assert worker.busy == 5 and worker.seen_at == T0 + 3 and worker.started_at == T0 - 60


def test_queue_stats_agrees_with_counts_through_every_transition(store):
    def check(at: float) -> None:
        stats = {s.name: s.counts for s in store.queue_stats(now=at) if s.counts}
        assert stats == store.counts(now=at)

    add(store, "a", "b", "c", "d", "e", "f", now=T0)
    add(store, "s", delay=50, now=T0)
    add(store, "m1", "m2", queue="mail", now=T0)
    store.enqueue([new("kid", after=("a",)), new("kid2", after=("b",))], now=T0)
    check(T0)
    first = claim(store, 6, now=T0 + 1)  # a b c d e f
    check(T0 + 1)
    settle(store, first[0], "done", now=T0 + 2)  # a done: kid released
    settle(store, first[1], "fail", error="x", now=T0 + 2)  # b failed: kid2 cancelled
    settle(store, first[2], "retry", error="x", delay=0, now=T0 + 2)
    settle(store, first[3], "snooze", delay=100, now=T0 + 2)
    check(T0 + 2)
    store.cancel("m1", now=T0 + 3)
    store.delete("m2", now=T0 + 3)
    store.retry("b", now=T0 + 3)
    check(T0 + 3)
    store.reap(now=T0 + 100)  # e and f's leases expired
    check(T0 + 100)
    store.end_leases([holder()], now=T0 + 101)
    done = claim(store, 20, now=T0 + 102)
    store.settle([Settlement(c.job.id, c.token, "done") for c in done], now=T0 + 103)
    check(T0 + 103)
    store.purge(now=T0 + 10 * 86400)
    check(T0 + 10 * 86400)


def test_finished_series_over_a_day_in_hourly_buckets(store):
    since = T0 - T0 % 60 - 86400  # whole minutes: every store agrees exactly
    for n, (start, end) in enumerate([(10, 20), (3590, 3610), (3700, 3720), (86000, 86010)]):
        _run(store, f"j{n}", since + start, since + end, "done")
    _run(store, "f", since + 7300, since + 7310, "fail")
    series = store.finished_series(since, 3600, now=since + 86400)
    assert series == [
        (since, "done", 1),
        (since + 3600, "done", 2),
        (since + 7200, "failed", 1),
        (since + 82800, "done", 1),
    ]


def _expected_series(store, ids, since, step, now):
    """The contract's series computed here from the executions as the store recorded them."""
    found: Counter[tuple[float, str]] = Counter()
    for job_id in ids:
        job = store.get(job_id, now=now, executions=True)
        for e in job.executions if job else ():
            if e.ended_at is not None and since <= e.ended_at <= now:
                found[(bucket_start(e.ended_at, since, step), e.outcome)] += 1
    return sorted((b, o, n) for (b, o), n in found.items())


def test_finished_series_puts_each_execution_in_its_formula_bucket_even_at_a_bound(store):
    # A step that no double holds: since + k * step is itself rounded, and the formula's
    # rounding puts scores a double away from it on either side (both ways, for some k).
    since, step = T0 + 0.1, 0.7
    ends = [math.nextafter(since, -math.inf), since] + [since + 0.01 * i for i in range(1, 20)]
    for k in (1, 2, 3, 7, 8, 12):
        b = since + k * step
        ends += [math.nextafter(b, -math.inf), b, math.nextafter(b, math.inf)]
    now = since + 13 * step
    ends += [now, math.nextafter(now, math.inf)]
    ids = [f"e{i}" for i in range(len(ends))]
    add(store, *ids, now=since - 10)
    running = {c.job.id: c for c in claim(store, len(ids), now=since - 10)}
    # Settled newest first: the series must not rely on executions ending in time order.
    for job_id, end in reversed(list(zip(ids, ends, strict=True))):
        fields = {"error": "x"} if job_id in ("e3", "e30") else {}
        assert settle(store, running[job_id], "fail" if fields else "done", now=end, **fields)
    expected = _expected_series(store, ids, since, step, now)
    assert len(expected) > 8 and sum(n for _, _, n in expected) == len(ends) - 2
    assert store.finished_series(since, step, now=now) == expected
    # The same executions counted over many more buckets (a store may read them another way).
    later = since + 400 * step
    assert store.finished_series(since, step, now=later) == _expected_series(store, ids, since, step, later)


def test_finished_series_counts_every_outcome_and_forgets_executions_that_went(store):
    lost_holder = holder(pid=999)
    add(store, "expired", "lost", "timeout", "gone", "purged", "cancelled", now=T0)
    add(store, "kept", now=T0, dedupe=10_000)
    add(store, "purged2", now=T0, dedupe=1)
    first = {c.job.id: c for c in claim(store, 3, now=T0)}  # expired, lost, timeout
    assert sorted(first) == ["expired", "lost", "timeout"]
    assert store.end_leases([holder()], now=T0 + 5) == 3  # every lease of this holder: worker lost
    again = {c.job.id: c for c in claim(store, 3, now=T0 + 10, by=lost_holder)}
    assert sorted(again) == ["expired", "lost", "timeout"]
    assert store.reap(now=T0 + 10 + 2 * LEASE) == 3  # lease expired (at T0 + 70)
    rest = {c.job.id: c for c in claim(store, 10, now=T0 + 100)}
    assert sorted(rest) == sorted([*again, "gone", "purged", "cancelled", "kept", "purged2"])
    store.cancel("cancelled", now=T0 + 100)
    assert settle(store, rest["cancelled"], "retry", error="x", now=T0 + 110)  # ends cancelled
    assert settle(store, rest["timeout"], "retry", error="slow", execution="timeout", now=T0 + 110)
    for job_id in ("expired", "lost", "gone", "purged", "kept", "purged2"):
        assert settle(store, rest[job_id], "done", now=T0 + 120)
    since, now = T0 - 60, T0 + 180
    assert store.finished_series(since, 60, now=now) == [
        (T0, "worker lost", 3),
        (T0 + 60, "cancelled", 1),
        (T0 + 60, "lease expired", 3),
        (T0 + 60, "timeout", 1),
        (T0 + 120, "done", 6),
    ]
    # Executions go with their job: deleted, or purged (done past its dedupe window).
    assert store.delete("gone", now=now)
    assert store.purge(now=T0 + 130) == 1  # purged2
    assert store.delete("purged", now=now)
    assert store.finished_series(since, 60, now=now) == [
        (T0, "worker lost", 3),
        (T0 + 60, "cancelled", 1),
        (T0 + 60, "lease expired", 3),
        (T0 + 60, "timeout", 1),
        (T0 + 120, "done", 3),
    ]
    for job_id in ("expired", "lost", "timeout"):
        assert store.delete(job_id, now=now)
    assert store.finished_series(since, 60, now=now) == [(T0 + 60, "cancelled", 1), (T0 + 120, "done", 1)]
    assert store.delete("cancelled", now=now) and store.delete("kept", now=now)
    assert store.finished_series(since, 60, now=now) == []


def test_execution_stats_buckets_are_exact_at_their_bounds(store):
    _run(store, "a", T0, T0 + 1.0, "done")  # exactly 1 s: in the 1 s bucket
    _run(store, "b", T0, T0 + 1.25, "done")
    _run(store, "c", T0, T0 + 0.5, "done")
    _run(store, "d", T0, T0 + 3600, "done")
    [stats] = store.execution_stats([0.5, 1, 1.25, 2.5, 3600], now=T0 + 4000)
    assert stats.count == 4 and stats.buckets == (1, 2, 3, 3, 4)
    assert stats.seconds == pytest.approx(3602.75)
    assert store.execution_stats([], now=T0 + 4000)[0].buckets == ()


def test_series_and_stats_follow_every_path_that_ends_or_removes_an_execution(store):
    """finished_series and execution_stats count exactly the ended executions on record (the
    executions `get` lists) after each way an execution ends (settle, reap, end_leases, a
    cancel then settle) or goes with its job (delete, cancel of a waiting job, an id taken
    again by enqueue, purge): stores that keep counters must keep them on every path."""
    since = T0 - T0 % 60 - 600  # whole minutes: the per-minute counters may serve it
    long_since = since - 86400  # a window past SQLite's EXACT_SERIES
    bounds = [0.5, 1, 5, 60]
    known = [*"abcdefgh", "z"]

    def check(at: float) -> None:
        ended = []
        for job_id in known:
            job = store.get(job_id, now=at, executions=True)
            ended += [(job.queue, e) for e in (job.executions if job else []) if e.ended_at is not None]
        for start in (since, long_since):
            want: dict[tuple[float, str], int] = {}
            for _, e in ended:
                if start <= e.ended_at <= at:
                    key = (start + (e.ended_at - start) // 60 * 60, e.outcome)
                    want[key] = want.get(key, 0) + 1
            assert store.finished_series(start, 60, now=at) == [
                (b, o, n) for (b, o), n in sorted(want.items())
            ]
        durations: dict[tuple[str, str], list[float]] = {}
        for queue, e in ended:
            durations.setdefault((queue, e.outcome), []).append(max(e.ended_at - e.started_at, 0))
        got = {(s.queue, s.outcome): s for s in store.execution_stats(bounds, now=at)}
        assert sorted(got) == sorted(durations)
        for key, ds in durations.items():
            assert got[key].count == len(ds) and got[key].seconds == pytest.approx(sum(ds))
            assert got[key].buckets == tuple(sum(d <= b for d in ds) for b in bounds)

    add(store, "a", "b", "c", "d", "e", "f", now=T0)
    add(store, "g", "h", max_attempts=1, now=T0)
    add(store, "z", queue="mail", now=T0)
    by_id = {c.job.id: c for c in claim(store, 4, now=T0 + 1, by=holder(1))}
    assert sorted(by_id) == ["a", "b", "c", "d"]
    assert sorted(ids(claim(store, 2, now=T0 + 2, by=holder(2)))) == ["e", "f"]
    assert sorted(ids(claim(store, 2, now=T0 + 3, by=holder(3)))) == ["g", "h"]
    mail = claim_one(store, now=T0 + 3, on=queues("mail"))
    check(T0 + 3)  # nothing ended yet
    # settle: done, failed, retried (its execution ends "error", the job waits again)
    assert settle(store, by_id["a"], "done", now=T0 + 4)
    assert settle(store, by_id["b"], "fail", error="no", now=T0 + 5.5)
    assert settle(store, by_id["c"], "retry", error="again", delay=0, now=T0 + 6)
    assert settle(store, mail, "done", now=T0 + 3.25)
    check(T0 + 6)
    # a cancel of a running job, then its settlement: the execution ends cancelled
    assert store.cancel("d", now=T0 + 7)
    assert settle(store, by_id["d"], "fail", error="no", now=T0 + 9)
    check(T0 + 9)
    # a lease that expired, returned by the reaper; a lost worker's leases
    assert store.reap(now=T0 + 32.5) == 2  # e and f (g and h expire at T0 + 33)
    check(T0 + 32.5)
    store.end_leases([holder(3)], now=T0 + 40)  # g and h: their only attempt, failed
    check(T0 + 40)
    # a retried job runs again
    assert store.retry("b", now=T0 + 41)
    again = claim(store, 10, now=T0 + 42, by=holder(4))
    assert sorted(ids(again)) == ["b", "c", "e", "f"]
    for c in again:
        assert settle(store, c, "done", now=T0 + 100)
    check(T0 + 100)
    # gone with their job: delete; an id taken again (alone, and in a batch); a waiting job
    # with a past execution cancelled
    assert store.delete("a", now=T0 + 101)
    [h] = add(store, "h", now=T0 + 102)
    assert h.created
    assert [j.created for j in add(store, "g", "y", now=T0 + 103)] == [True, True]
    assert settle(
        store, claim_one(store, now=T0 + 104, by=holder(5)), "retry", error="x", delay=0, now=T0 + 105
    )
    check(T0 + 105)
    waiting = [j for j in known if state(store, j, now=T0 + 105) == "waiting"]
    assert waiting
    assert store.cancel(waiting[0], now=T0 + 106) and store.get(waiting[0], now=T0 + 106) is None
    check(T0 + 106)
    assert store.purge(now=T0 + 30 * 86400) > 0
    check(T0 + 30 * 86400)
