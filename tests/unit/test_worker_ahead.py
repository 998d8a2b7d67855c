"""Claiming ahead (tinyjobs/ahead.py): a worker whose jobs are short claims up to
twice `slots` jobs beyond its free slots and its slot threads start them as their jobs return. In
this process, on the memory store; the crash and signal cases are in
tests/process/test_claim_ahead.py."""

from __future__ import annotations

import asyncio
import threading
import time

import structlog
from support.wait import wait_until
from support.workers import worker_thread

import tinyjobs
from tinyjobs.stop import StopReason
from tinyjobs.worker import Worker


def watch_held(peak: dict[str, int]):
    """An on_tick hook that keeps the most jobs the worker held claimed ahead at a turn."""

    def tick(worker: Worker) -> None:
        peak["held"] = max(peak.get("held", 0), len(worker._ahead))
        peak["in_hand"] = max(peak.get("in_hand", 0), len(worker.running))

    return tick


def test_slots_start_jobs_claimed_ahead_never_more_than_slots_at_once_each_once_with_two_lines():
    app = tinyjobs.App("memory://")
    lock, now, most = threading.Lock(), [0], [0]

    def enter() -> None:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])

    def leave() -> None:
        with lock:
            now[0] -= 1

    @app.task
    def quick(run, n):
        enter()
        leave()

    @app.task
    async def quick_async(run, n):
        enter()
        await asyncio.sleep(0)
        leave()

    jobs = quick.enqueue_many([{"n": i} for i in range(300)])
    jobs += quick_async.enqueue_many([{"n": i} for i in range(30)])
    jobs += quick.enqueue_many([{"n": i} for i in range(300)])
    peak: dict[str, int] = {}
    with structlog.testing.capture_logs() as events, worker_thread(app, slots=2, on_tick=watch_held(peak)):
        wait_until(lambda: all(app.get(j.id).state == "done" for j in jobs), timeout=30, what="every job")
    app.close()
    assert peak["held"] > 0, "claimed ahead"
    assert peak["in_hand"] <= 2 + 2 * 2  # slots + at most AHEAD x slots ahead
    assert most[0] <= 2, "never more jobs running at once than slots"
    lines: dict[str, list[str]] = {}
    for event in events:
        if "job_id" in event:
            lines.setdefault(event["job_id"], []).append(event["event"])
    assert all(lines[j.id] == ["job.started", "job.done"] for j in jobs)


def test_no_job_is_claimed_ahead_for_a_queue_with_a_limit():
    app = tinyjobs.App("memory://")
    app.queue("capped", concurrency=4)

    @app.task(queue="capped")
    def quick(run, n):
        return None

    jobs = quick.enqueue_many([{"n": i} for i in range(200)])
    peak: dict[str, int] = {}
    with worker_thread(app, slots=2, on_tick=watch_held(peak)):
        wait_until(lambda: all(app.get(j.id).state == "done" for j in jobs), timeout=30, what="every job")
    app.close()
    assert peak["held"] == 0 and peak["in_hand"] <= 2


def test_max_jobs_counts_jobs_claimed_ahead_none_is_handed_back():
    app = tinyjobs.App("memory://")

    @app.task
    def quick(run, n):
        return None

    jobs = quick.enqueue_many([{"n": i} for i in range(60)])
    worker = Worker(app, slots=2, max_jobs=25, handle_signals=False)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive() and worker.reason is StopReason.MAX_JOBS
    states = [app.get(j.id) for j in jobs]
    assert sum(j.state == "done" for j in states) == 25
    assert sum(j.state == "waiting" for j in states) == 35
    assert all(j.attempts == 0 and not j.executions for j in states if j.state == "waiting")
    app.close()


def test_a_long_job_running_stops_claiming_ahead():
    app = tinyjobs.App("memory://")
    release = threading.Event()

    @app.task
    def quick(run, n):
        return None

    @app.task
    def slow(run):
        release.wait(10)

    warm = quick.enqueue_many([{"n": i} for i in range(20)])
    peak: dict[str, int] = {}
    with worker_thread(app, slots=2, on_tick=watch_held(peak)):
        wait_until(lambda: all(app.get(j.id).state == "done" for j in warm), timeout=30, what="the warm-up")
        long = slow.enqueue()
        wait_until(lambda: app.get(long.id).state == "running", timeout=10, what="the slow job")
        time.sleep(0.05)  # longer than a short job: the slow one is running long now
        rest = quick.enqueue_many([{"n": i} for i in range(10)])
        wait_until(lambda: all(app.get(j.id).state == "done" for j in rest), timeout=10, what="the rest")
        peak.clear()
        more = quick.enqueue_many([{"n": i} for i in range(10)])
        wait_until(lambda: all(app.get(j.id).state == "done" for j in more), timeout=10, what="more")
        assert peak.get("held", 0) == 0, "no job claimed ahead while one runs long"
        release.set()
    app.close()


def test_jobs_claimed_ahead_have_their_leases_renewed_with_the_running_ones(monkeypatch):
    monkeypatch.setattr("tinyjobs.ahead.HOLD_FOR", 60.0)  # held until the slow jobs end
    app = tinyjobs.App("memory://")
    app.queue("work", lease="1s")  # renewed every 0.5 s; the worker's reaper ends it after 1 s
    release = threading.Event()

    @app.task(queue="work")
    def quick(run, n):
        return None

    @app.task(queue="work")
    def slow(run):
        release.wait(20)

    renewed: list[set[str]] = []
    renew = app.store.renew

    def counted(tokens, now=None):
        renewed.append(set(tokens))
        return renew(tokens, now)

    app.store.renew = counted  # type: ignore[method-assign]
    warm = quick.enqueue_many([{"n": i} for i in range(20)])
    with worker_thread(app, slots=2) as worker:
        try:
            check_renewals(app, worker, renewed, warm)
        finally:
            release.set()
    app.close()


def check_renewals(app, worker: Worker, renewed: list[set[str]], warm) -> None:
    """Two slow jobs in both slots, two quick ones held behind them: the held ones' tokens are in
    every renewal, and none of the four is reaped past its 1 s lease."""
    wait_until(lambda: all(app.get(j.id).state == "done" for j in warm), timeout=30, what="the warm-up")
    jobs = app.enqueue_many([("slow", {})] * 2 + [("quick", {"n": 0})] * 2)
    wait_until(lambda: len(worker._ahead) == 2, timeout=10, what="two jobs held")
    held = {entry.claimed.token for entry in worker._ahead.held()}
    began = len(renewed)
    wait_until(lambda: len(renewed) >= began + 3, timeout=10, what="three renewals (1.5 s, past the lease)")
    assert all(held <= tokens for tokens in renewed[began:])
    assert [app.get(j.id).state for j in jobs] == ["running"] * 4
    assert all(app.get(j.id).attempts == 1 for j in jobs), "none reaped as expired"
