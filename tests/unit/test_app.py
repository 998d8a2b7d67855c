"""The App's registration and enqueue checks, on memory:// with a clock the test moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import tinyjobs
from tinyjobs.errors import ConfigError, DuplicateTask, PayloadTooLarge, UnknownTask


@pytest.fixture
def clock():
    return tinyjobs.FakeClock(datetime(2026, 1, 1, tzinfo=UTC))


@pytest.fixture
def app(clock):
    return tinyjobs.App("memory://", clock=clock, max_payload=1000)


def test_task_names_default_to_the_function_and_must_be_unique(app):
    @app.task
    def send(run, to):
        return to

    assert send.name == "send" and app.tasks["send"] is send
    with pytest.raises(DuplicateTask, match="'send'"):

        @app.task(name="send")
        def other(run):
            return None


def test_handlers_must_take_a_run_and_not_shadow_enqueue_options(app):
    with pytest.raises(ConfigError, match="Run as its first argument"):
        app.task(lambda: None)
    with pytest.raises(ConfigError, match="delay"):

        @app.task
        def clash(run, delay):
            return None


def test_unknown_tasks_and_bad_options_are_refused_before_anything_is_written(app):
    @app.task
    def send(run, to):
        return to

    with pytest.raises(UnknownTask, match="'sned'"):
        app.enqueue("sned", {"to": "x"})
    with pytest.raises(ConfigError, match="aware datetime"):
        send.enqueue(to="x", at=datetime(2026, 1, 2))
    with pytest.raises(ConfigError, match="delay"):
        send.enqueue(to="x", delay="later")
    with pytest.raises(ConfigError, match="priority"):
        send.enqueue(to="x", priority="high")
    with pytest.raises(PayloadTooLarge, match="1000 bytes"):
        send.enqueue(to="x" * 2000)
    assert app.jobs() == []


def test_delay_and_at_set_the_due_time_by_the_app_clock(app, clock):
    @app.task
    def ping(run):
        return "pong"

    later = ping.enqueue(delay="10m")
    at = ping.enqueue(at=datetime(2026, 1, 1, 1, tzinfo=UTC))
    assert later.state == "scheduled" and later.due == clock_dt(clock) + timedelta(minutes=10)
    assert at.due == datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert app.drain() == 0
    clock.advance("10m")
    assert app.drain() == 1
    clock.advance("1h")
    assert app.drain() == 1


def clock_dt(clock):
    return datetime.fromtimestamp(clock.now(), UTC)


def test_queue_settings_are_checked(app):
    with pytest.raises(ConfigError, match="concurrency"):
        app.queue("q", concurrency=0)
    with pytest.raises(ConfigError, match="rate"):
        app.queue("q", rate="fast")
    with pytest.raises(ConfigError, match="lease"):
        app.queue("q", lease="0.5s")
    config = app.queue("q", concurrency=2, rate="10/m", timeout="5m", lease="1m")
    assert config.policy.rate == (10, 60.0) and config.timeout == 300 and config.policy.lease == 60


def test_watch_yields_each_change_and_sees_a_cancelled_waiting_job(app):
    @app.task
    def ping(run):
        return "pong"

    job = ping.enqueue()
    seen = app.watch(job.id, interval=0)
    assert next(seen).state == "waiting"
    app.cancel(job.id)
    assert next(seen).state == "cancelled"
    assert list(seen) == []


def test_the_url_is_masked_in_repr():
    app = tinyjobs.App("postgresql://app:s3cret@db/app")
    assert "s3cret" not in repr(app) and "***" in repr(app)


def test_filling_a_template_keeps_every_field_of_new_job():
    from dataclasses import fields, replace

    from tinyjobs.stores.base import NewJob, filled

    template = NewJob(
        id="", task="t", queue="q", payload="{}", priority=3, delay=5.0, at=1.0, key="k", group="g",
        after=("a",), max_attempts=7, dedupe=9.0, keep=11.0,
    )  # fmt: skip
    assert {f.name for f in fields(NewJob)} == {f.name for f in fields(template)}
    assert filled(template, "id1", '{"n":1}') == replace(template, id="id1", payload='{"n":1}')


def test_a_task_registered_after_an_enqueue_gets_its_own_settings(app):
    # An app without tasks enqueues any name with the defaults; templates without options are
    # kept per app, so registering the task afterwards must replace the one kept for its name.
    before = app.enqueue("send")
    assert (before.queue, before.max_attempts) == ("default", 20)

    @app.task(queue="mail", attempts=7)
    def send(run):
        return None

    after = app.enqueue("send")
    assert (after.queue, after.max_attempts) == ("mail", 7)
    with pytest.raises(UnknownTask):
        app.enqueue("nobody")


def test_pause_resume_and_delete_go_through_the_app(app):
    @app.task(queue="mail")
    def send(run, to):
        return to

    job = send.enqueue(to="ann")
    app.pause("mail")
    assert app.store.paused() == {"mail"} and app.drain() == 0
    app.resume("mail")
    assert app.drain() == 1 and app.get(job.id).state == "done"
    other = send.enqueue(to="bob")
    assert app.delete(other.id) is True and app.get(other.id) is None
    assert app.delete(other.id) is False
