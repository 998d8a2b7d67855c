"""`jobs` paging (both orders, offsets, a queue filter) and `counts` over every state, checked
against a reference built from what the test did, on every store. Sizes pass the Redis
script's first read of a final state's set (256), so its chunked read is crossed."""

from __future__ import annotations

from helpers import T0, add, claim, new, queues

from tinyjobs.stores.base import Settlement


def _finish(store, count: int, queue: str, outcome: str, now: float, turn: int = 0) -> list[str]:
    """Enqueue `count` jobs on `queue`, claim them all and settle each with `outcome`."""
    names = [f"{queue}-{outcome}-{turn}-{i:04d}" for i in range(count)]
    add(store, *names, queue=queue, now=now)
    taken = claim(store, count, now=now, on=queues(queue))
    assert sorted(c.job.id for c in taken) == names
    fields = {"error": "no"} if outcome == "fail" else {}
    settlements = [Settlement(c.job.id, c.token, outcome, **fields) for c in taken]
    assert all(store.settle(settlements, now=now + 1))
    return names


def test_jobs_pages_finished_jobs_in_both_orders_with_a_queue_filter(store):
    order: list[str] = []  # enqueue order across queues: the order `jobs` lists
    for turn in range(3):  # interleaved, so a queue's jobs are spread along the sequence
        order += _finish(store, 120, "mail", "done", T0 + turn * 10, turn)
        order += _finish(store, 100, "sms", "done", T0 + turn * 10 + 5, turn)
    mail = [i for i in order if i.startswith("mail")]
    listed = [j.id for j in store.jobs("done", limit=1000, now=T0 + 100)]
    assert listed == order
    newest = [j.id for j in store.jobs("done", limit=1000, now=T0 + 100, newest=True)]
    assert newest == order[::-1]
    page = store.jobs("done", queue="mail", limit=50, offset=300, now=T0 + 100, newest=True)
    assert [j.id for j in page] == mail[::-1][300:350]
    page = store.jobs("done", queue="mail", limit=40, offset=20, now=T0 + 100)
    assert [j.id for j in page] == mail[20:60]
    assert store.jobs("done", queue="sms", limit=10, offset=300, now=T0 + 100) == []


def test_counts_report_every_state_per_queue(store):
    _finish(store, 3, "mail", "done", T0)
    _finish(store, 2, "mail", "fail", T0)
    add(store, "w1", "w2", queue="mail", now=T0)
    add(store, "s1", queue="mail", delay=500, now=T0)
    add(store, "kid", queue="mail", after=("w1",), now=T0)
    add(store, "r1", "r2", queue="sms", now=T0)
    claim(store, 1, now=T0 + 2, on=queues("sms"))
    assert store.counts(now=T0 + 10) == {
        "mail": {"done": 3, "failed": 2, "waiting": 2, "scheduled": 1, "blocked": 1},
        "sms": {"running": 1, "waiting": 1},
    }
    # The scheduled job falls due: it counts as waiting from then on.
    assert store.counts(now=T0 + 600)["mail"]["waiting"] == 3


def test_jobs_pages_live_and_finished_jobs_together_in_enqueue_order(store):
    # Priorities rise with the enqueue order, so the claim order of waiting jobs runs against it.
    order = [f"w{i:03d}" for i in range(60)]
    store.enqueue([new(job_id, priority=i) for i, job_id in enumerate(order)], now=T0)
    order += _finish(store, 30, "mail", "done", T0 + 1)
    order += _finish(store, 20, "mail", "fail", T0 + 2)
    later = [f"s{i:03d}" for i in range(25)]
    store.enqueue([new(job_id, delay=1000) for job_id in later], now=T0 + 3)
    order += later
    running = [f"r{i:02d}" for i in range(10)]
    add(store, *running, queue="run", now=T0 + 4)
    assert len(claim(store, 10, now=T0 + 5, on=queues("run"))) == 10
    order += running
    at = T0 + 10
    assert [j.id for j in store.jobs(limit=1000, now=at)] == order
    assert [j.id for j in store.jobs(limit=1000, now=at, newest=True)] == order[::-1]
    for offset, limit in [(0, 7), (5, 20), (55, 30), (140, 10)]:
        oldest = store.jobs(limit=limit, offset=offset, now=at)
        assert [j.id for j in oldest] == order[offset : offset + limit]
        newest = store.jobs(limit=limit, offset=offset, now=at, newest=True)
        assert [j.id for j in newest] == order[::-1][offset : offset + limit]
    waiting = [i for i in order if i.startswith("w")]
    assert [j.id for j in store.jobs("waiting", limit=9, offset=3, now=at)] == waiting[3:12]
    newest = store.jobs("waiting", limit=9, offset=3, now=at, newest=True)
    assert [j.id for j in newest] == waiting[::-1][3:12]
    assert [j.id for j in store.jobs("scheduled", limit=10, offset=12, now=at)] == later[12:22]
    assert [j.id for j in store.jobs("running", limit=3, offset=2, now=at, newest=True)] == running[::-1][2:5]
