"""A job whose arguments cannot bind to its handler fails for good at its first attempt, with the
reason, on every store, through `app.drain()` and through a real Worker: an argument error is
not transient, so retrying by backoff (20 attempts by default) would only hide it.

The jobs are written straight to the store, as a job enqueued by name from another app or
written before a deploy changed the handler's signature reaches a worker."""

from __future__ import annotations

import pytest
import structlog
from support.wait import wait_until
from support.workers import worker_thread

import tinyjobs
from tinyjobs.stores.base import NewJob


@pytest.fixture
def clock():
    return tinyjobs.FakeClock()


@pytest.fixture
def app(store, clock):
    app = tinyjobs.App(store, clock=clock)

    @app.task
    def needs_x(run, x):
        return x

    @app.task
    async def needs_x_async(run, x):
        return x

    @app.task
    def raises_type_error(run, x):
        raise TypeError(f"the handler's own TypeError for {x}")

    return app


def add(app: tinyjobs.App, job_id: str, task: str, payload: str) -> None:
    app.store.enqueue([NewJob(id=job_id, task=task, payload=payload)], app.clock.store_now())


@pytest.mark.parametrize("task", ["needs_x", "needs_x_async"])
@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{}", "arguments: missing argument 'x';"),
        ('{"x": 1, "y": 2}', "arguments: unexpected argument 'y';"),
        ('{"xx": 1}', "arguments: missing argument 'x'; unexpected argument 'xx' (did you mean 'x'?);"),
    ],
)
def test_arguments_that_do_not_bind_fail_the_job_at_once_with_the_reason(app, clock, task, payload, reason):
    add(app, "j1", task, payload)

    assert app.drain() == 1
    job = app.get("j1")
    assert job.state == "failed" and job.attempts == 1
    assert job.error.startswith("ArgumentError:") and reason in job.error
    assert f"task {task!r}: its handler {task}(run, x) cannot take the job's arguments" in job.error
    assert job.error.endswith("failed at once, as a retry cannot change them")
    assert [e.outcome for e in job.executions] == ["failed"]
    clock.advance("2h")
    assert app.drain() == 0  # not retried


def test_a_typeerror_raised_inside_a_handler_whose_arguments_bind_is_retried(app, clock):
    add(app, "j1", "raises_type_error", '{"x": 5}')

    assert app.drain() == 1
    job = app.get("j1")
    assert job.state in ("scheduled", "waiting") and job.attempts == 1
    assert "the handler's own TypeError for 5" in job.error and "ArgumentError" not in job.error


def test_a_worker_fails_a_job_whose_arguments_do_not_bind_and_logs_why(app):
    add(app, "sync", "needs_x", '{"y": 1}')
    add(app, "async", "needs_x_async", "{}")
    add(app, "fits", "needs_x", '{"x": 3}')

    with structlog.testing.capture_logs() as events, worker_thread(app, slots=2):
        wait_until(
            lambda: all(app.get(i).state in ("failed", "done") for i in ("sync", "async", "fits")),
            timeout=10,
            what="the three jobs to end",
        )
    assert app.get("fits").result == 3
    for job_id, reason in (
        ("sync", "missing argument 'x'; unexpected argument 'y'"),
        ("async", "missing argument 'x'"),
    ):
        job = app.get(job_id)
        assert job.state == "failed" and job.attempts == 1 and reason in job.error
        [ended] = [e for e in events if e.get("job_id") == job_id and e["event"] != "job.started"]
        assert ended["event"] == "job.failed" and ended["log_level"] == "error"
        assert ended["error"].startswith("ArgumentError:")
