"""The execution layer decides once what an attempt makes of its job (its Ending's verdict) and
the worker logs from it; the store applies the settlement by its own rules. On every store, the
verdict must be what the store then makes of the job."""

from __future__ import annotations

import pytest

import tinyjobs
from tinyjobs.drain import run_one
from tinyjobs.execution import handed_back
from tinyjobs.holder import Holder

STATES = {
    "done": {"done"},
    "retrying": {"scheduled", "waiting"},
    "failed": {"failed"},
    "snoozed": {"scheduled"},
    "handed_back": {"waiting"},
}


@pytest.fixture
def clock():
    return tinyjobs.FakeClock()


@pytest.fixture
def app(store, clock):
    app = tinyjobs.App(store, clock=clock)

    @app.task(attempts=2)
    def boom(run):
        raise ValueError("boom")

    @app.task(attempts=2)
    def again(run):
        return run.retry("1m")

    @app.task
    def ok(run):
        return {"fine": True}

    @app.task
    def later(run):
        return run.snooze("5m")

    @app.task
    def give_up(run):
        return run.fail("no")

    return app


def claim_one(app: tinyjobs.App):
    [claimed] = app.store.claim(app.policies(), Holder.current(), 1, app.clock.store_now())
    return claimed


@pytest.mark.parametrize(
    ("task", "verdicts"),
    [
        ("boom", ["retrying", "failed"]),  # the second attempt is the last
        ("again", ["retrying", "failed"]),
        ("ok", ["done"]),
        ("later", ["snoozed"]),
        ("give_up", ["failed"]),
        ("nosuchtask", ["retrying"]),
    ],
)
def test_each_verdict_is_the_state_the_store_makes_of_the_job(app, clock, task, verdicts):
    job = app.enqueue(task) if task != "nosuchtask" else tinyjobs.App(app.store, clock=clock).enqueue(task)
    for verdict in verdicts:
        ending = run_one(app, claim_one(app))
        assert ending is not None and ending.verdict == verdict
        assert app.store.settle([ending.settlement], app.clock.store_now()) == [True]
        assert app.get(job.id).state in STATES[verdict]
        clock.advance("2h")


def test_a_handed_back_job_is_waiting_again_with_its_attempt_given_back(app):
    job = app.enqueue("ok")
    ending = handed_back(claim_one(app))
    assert ending.verdict == "handed_back"
    assert app.store.settle([ending.settlement], app.clock.store_now()) == [True]
    after = app.get(job.id)
    assert after.state in STATES["handed_back"] and after.attempts == 0
