"""Contracts that need the App, the handler and its Run, on every store (JOB-02/03/06/07/12)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from support.connections import caller_connection
from support.wait import wait_until
from support.workers import worker_thread

import tinyjobs
from tinyjobs.errors import SerializationError
from tinyjobs.stores.base import NewJob


@pytest.fixture
def clock():
    return tinyjobs.FakeClock()


@pytest.fixture
def app(store, clock):
    return tinyjobs.App(store, clock=clock)


def test_job03_a_handler_that_always_fails_reaches_its_attempts_and_fails_for_good(app, clock):
    @app.task(attempts=3)
    def doomed(run):
        raise ValueError(f"attempt {run.attempt} failed")

    job = doomed.enqueue()
    for _ in range(3):
        assert app.drain() == 1
        clock.advance("1h")
    final = app.get(job.id)
    assert final.state == "failed" and final.attempts == 3
    assert "attempt 3 failed" in final.error
    assert [e.attempt for e in final.executions] == [1, 2, 3]
    assert app.drain() == 0


def test_job06_a_kept_step_is_returned_to_the_next_attempt_without_calling_fn(app, clock):
    calls = []

    @app.task
    def reply(run, message_id):
        answer = run.step("answer", lambda: calls.append(message_id) or f"answer {message_id}")
        if run.attempt == 1:
            raise RuntimeError("crash after the step")
        return {"answer": answer}

    job = reply.enqueue(message_id=41)
    app.drain()
    clock.advance("2s")
    app.drain()
    assert calls == [41]
    assert app.get(job.id).result == {"answer": "answer 41"}


def test_job06_async_handlers_await_their_steps(app, clock):
    calls = []

    async def model(x):
        calls.append(x)
        await asyncio.sleep(0)
        return x * 2

    @app.task
    async def double(run, x):
        value = await run.step("model", model, x)
        if run.attempt == 1:
            raise RuntimeError("crash after the step")
        return value

    job = double.enqueue(x=21)
    app.drain()
    clock.advance("2s")
    app.drain()
    assert calls == [21] and app.get(job.id).result == 42


def test_job06_a_step_value_that_is_not_json_is_refused_by_name(app):
    @app.task(attempts=1)
    def bad(run):
        run.step("when", lambda: object())

    job = bad.enqueue()
    app.drain()
    failed = app.get(job.id)
    assert failed.state == "failed" and "step 'when'" in failed.error


def test_job07_raising_handlers_back_off_exponentially_with_jitter(app, clock):
    @app.task
    def flaky(run):
        raise RuntimeError("no")

    job = flaky.enqueue()
    for attempt, base in [(1, 1), (2, 2), (3, 4), (4, 8)]:
        before = clock.now()
        assert app.drain() == 1
        waiting = app.get(job.id)
        assert waiting.attempts == attempt and waiting.state == "scheduled"
        assert base * 0.9 <= waiting.due_at - before <= base * 1.1
        clock.set(waiting.due_at)


def test_job07_retry_counts_snooze_does_not_fail_is_final(app, clock):
    answers = {
        "retry": lambda run: run.retry("10m"),
        "snooze": lambda run: run.snooze("10m"),
        "fail": lambda run: run.fail("the model refused"),
    }

    @app.task
    def answer(run, how):
        return answers[how](run)

    jobs = {how: answer.enqueue(how=how) for how in answers}
    start = clock.now()
    assert app.drain() == 3
    retried, snoozed, failed = (app.get(jobs[h].id) for h in ("retry", "snooze", "fail"))
    assert (retried.state, retried.attempts, retried.due_at) == ("scheduled", 1, start + 600)
    assert (snoozed.state, snoozed.attempts, snoozed.due_at) == ("scheduled", 0, start + 600)
    assert (failed.state, failed.attempts, failed.error) == ("failed", 1, "the model refused")


def test_job07_a_result_that_is_not_json_fails_the_job_naming_the_result(app):
    @app.task
    def returns_a_set(run):
        return {1, 2}

    job = returns_a_set.enqueue()
    app.drain()
    assert "result" in app.get(job.id).error and app.get(job.id).state == "failed"


def test_enqueue_refuses_non_json_arguments_and_writes_nothing(app):
    @app.task
    def send(run, to, when):
        return None

    with pytest.raises(SerializationError, match="argument 'when'"):
        send.enqueue_many([{"to": "a", "when": 1}, {"to": "b", "when": object()}])
    assert app.jobs() == []


def test_enqueue_many_writes_all_in_order(app):
    @app.task
    def add(run, n):
        return n + 1

    jobs = add.enqueue_many([{"n": i} for i in range(50)])
    assert [j.args["n"] for j in jobs] == list(range(50)) and all(j.created for j in jobs)
    assert app.drain() == 50
    assert [app.get(j.id).result for j in jobs] == [i + 1 for i in range(50)]


@pytest.mark.sync_and_async
@pytest.mark.requires("transactions")
def test_job02_a_job_enqueued_in_a_transaction_exists_exactly_when_it_commits(store):
    app = tinyjobs.App(store)

    @app.task
    def welcome(run, user):
        return user

    conn = caller_connection(store)
    try:
        rolled_back = welcome.enqueue(user="ann", id="welcome:ann", conn=conn)
        assert rolled_back.created and app.get("welcome:ann") is None  # not visible outside yet
        conn.rollback()
        assert app.get("welcome:ann") is None
        welcome.enqueue(user="bob", id="welcome:bob", conn=conn)
        assert app.get("welcome:bob") is None
        conn.commit()
        assert app.get("welcome:bob").state == "waiting"
    finally:
        conn.close()


@pytest.mark.sync_and_async
def test_job02_stores_without_transactions_refuse_conn_clearly(store):
    if "transactions" in store.capabilities:
        pytest.skip("this store writes inside the caller's transaction (the test above)")
    with pytest.raises(tinyjobs.NotSupported, match="transaction"):
        store.enqueue([NewJob(id="x", task="t")], conn=object())


def test_job12_an_async_handler_past_its_timeout_is_cancelled_and_retried(store):
    app = tinyjobs.App(store)
    cancelled = threading.Event()

    @app.task(timeout=0.2)
    async def slow(run):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = slow.enqueue()
    with worker_thread(app, slots=2):
        later = wait_until(
            lambda: (j := app.get(job.id)) and j.attempts == 1 and j.state != "running" and j,
            timeout=10,
            what="the timed-out attempt to settle",
        )
    assert cancelled.is_set()
    assert later.state in ("scheduled", "waiting") and "TimeoutError" in later.error
    assert later.executions[0].outcome == "timeout"


def test_job12_a_sync_handler_past_its_timeout_recycles_its_worker_without_overlap(store):
    app = tinyjobs.App(store)
    release = threading.Event()
    runs = []

    @app.task(timeout=0.3)
    def stuck(run):
        runs.append(run.attempt)
        release.wait(20)  # cannot be stopped from outside, like C code

    @app.task
    def quick(run, n):
        return n

    job = stuck.enqueue()
    others = quick.enqueue_many([{"n": i} for i in range(5)])
    with worker_thread(app, slots=2) as worker:
        wait_until(lambda: worker.reason == "recycle", timeout=10, what="the worker to decide to recycle")
        wait_until(
            lambda: (j := app.get(job.id)) and j.state != "running",
            timeout=40,
            what="the timed-out job to be settled",
        )
    release.set()
    assert worker.exit_reason == "recycle"
    assert runs == [1]  # never ran again while the stuck thread lived
    settled = app.get(job.id)
    assert settled.attempts == 1 and "TimeoutError" in settled.error
    assert settled.executions[0].outcome == "timeout"
    done = [app.get(o.id).state for o in others]
    assert done.count("done") + done.count("waiting") == 5


def test_job04_a_lease_is_renewed_while_the_handler_runs(store):
    app = tinyjobs.App(store)
    app.queue("short", lease="2s")
    finished = threading.Event()

    @app.task(queue="short")
    def long_running(run):
        finished.wait(20)
        return "ok"

    job = long_running.enqueue()
    with worker_thread(app, slots=1):
        try:
            wait_until(lambda: app.get(job.id).state == "running", what="the job to start")
            deadline = store.now() + 4.5
            while store.now() < deadline:  # twice the lease: a reaper must find nothing expired
                assert store.reap() == 0
                time.sleep(0.1)  # polling inside the deadline above, not a fixed wait
        finally:
            finished.set()  # on a failure too: else the worker cannot drain and hides it
        wait_until(lambda: app.get(job.id).state == "done", what="the job to finish")
    assert [e.outcome for e in app.get(job.id).executions] == ["done"]


def test_job08_a_running_async_job_that_is_cancelled_stops_and_never_runs_again(store):
    app = tinyjobs.App(store)
    app.queue("short", lease="2s")
    started, cancelled = threading.Event(), threading.Event()

    @app.task(queue="short")
    async def long_running(run):
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = long_running.enqueue()
    with worker_thread(app, slots=1):
        assert started.wait(10)
        assert app.cancel(job.id)
        final = wait_until(
            lambda: (j := app.get(job.id)) and j.state == "cancelled" and j,
            timeout=10,
            what="the job to end cancelled",
        )
    assert cancelled.is_set() and final.attempts == 1
    assert app.drain() == 0


def test_max_jobs_claims_no_more_than_it_will_run(store):
    app = tinyjobs.App(store)

    @app.task
    def quick(run, n):
        return n

    jobs = quick.enqueue_many([{"n": i} for i in range(10)])
    with worker_thread(app, slots=8, max_jobs=3) as worker:
        wait_until(lambda: worker.reason == "max-jobs", timeout=10, what="the worker to reach --max-jobs")
    states = [app.get(j.id) for j in jobs]
    assert sum(j.state == "done" for j in states) == 3
    # the others were never claimed: no attempt taken and handed back
    assert all(j.executions == [] for j in states if j.state != "done")
