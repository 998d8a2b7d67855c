"""DEP-01 through the App, on every store: `enqueue(..., after=...)` runs a job once all of its
parents succeed; a parent that fails for good or is cancelled cancels it, on record."""

from __future__ import annotations

import pytest

import tinyjobs
from tinyjobs.errors import JobNotFound


@pytest.fixture
def clock():
    return tinyjobs.FakeClock()


@pytest.fixture
def app(store, clock):
    app = tinyjobs.App(store, clock=clock)
    app.ran = []  # type: ignore[attr-defined]

    @app.task
    def step(run, name):
        app.ran.append(name)
        return name

    @app.task(attempts=2)
    def broken(run, name):
        app.ran.append(name)
        raise RuntimeError(f"{name} broke")

    return app


def test_dep01_a_chain_runs_in_order(app):
    a = app.enqueue("step", {"name": "a"})
    b = app.enqueue("step", {"name": "b"}, after=a)
    c = app.enqueue("step", {"name": "c"}, after=b)
    assert (app.get(b.id).state, app.get(c.id).state) == ("blocked", "blocked")
    assert app.drain() == 3
    assert app.ran == ["a", "b", "c"]
    assert [app.get(j.id).state for j in (a, b, c)] == ["done"] * 3


def test_dep01_a_chain_enqueued_in_reverse_due_order_still_runs_in_order(app, clock):
    a = app.enqueue("step", {"name": "a"}, delay="10s")
    b = app.enqueue("step", {"name": "b"}, after=a)
    assert app.drain() == 0  # a is scheduled, b waits for it
    assert app.get(b.id).state == "blocked"
    clock.advance("10s")
    assert app.drain() == 2
    assert app.ran == ["a", "b"]


def test_dep01_fan_in_waits_for_every_parent(app):
    parents = [app.enqueue("step", {"name": f"p{i}"}, delay=i) for i in range(3)]
    child = app.enqueue("step", {"name": "child"}, after=parents)
    assert app.drain() == 1  # only p0 is due
    assert app.get(child.id).state == "blocked"
    app.clock.advance("1s")
    assert app.drain() == 1
    assert app.get(child.id).state == "blocked"
    app.clock.advance("1s")
    assert app.drain() == 2
    assert app.ran == ["p0", "p1", "p2", "child"]


def test_dep01_fan_out_runs_every_child_after_the_parent(app):
    parent = app.enqueue("step", {"name": "parent"})
    children = app.enqueue_many([("step", {"name": f"c{i}"}) for i in range(3)], after=parent)
    assert {app.get(j.id).state for j in children} == {"blocked"}
    assert app.drain() == 4
    assert app.ran[0] == "parent" and sorted(app.ran[1:]) == ["c0", "c1", "c2"]


def test_dep01_a_parent_failing_for_good_cancels_the_child_on_record(app, clock):
    parent = app.enqueue("broken", {"name": "parent"})
    child = app.enqueue("step", {"name": "child"}, after=parent)
    grandchild = app.enqueue("step", {"name": "grandchild"}, after=child)
    assert app.drain() == 1
    assert app.get(child.id).state == "blocked"  # the parent retries: not failed for good yet
    clock.advance("1h")
    assert app.drain() == 1
    assert app.get(parent.id).state == "failed"
    for job, parent_id, why in ((child, parent.id, "failed"), (grandchild, child.id, "cancelled")):
        on_record = app.get(job.id)
        assert on_record.state == "cancelled"
        assert parent_id in on_record.error and why in on_record.error.split(parent_id)[1]
    clock.advance("1h")
    assert app.drain() == 0
    assert app.ran == ["parent", "parent"]


def test_dep01_a_parent_that_fails_now_cancels_the_child(app):
    @app.task
    def refuse(run):
        return run.fail("not today")

    parent = app.enqueue("refuse")
    child = app.enqueue("step", {"name": "child"}, after=parent)
    assert app.drain() == 1
    on_record = app.get(child.id)
    assert on_record.state == "cancelled" and parent.id in on_record.error


def test_dep01_a_cancelled_parent_cancels_the_child_on_record(app):
    parent = app.enqueue("step", {"name": "parent"}, delay="1m")
    child = app.enqueue("step", {"name": "child"}, after=parent)
    assert app.cancel(parent.id) is True
    assert app.get(parent.id) is None  # a waiting job the user cancels is gone
    on_record = app.get(child.id)
    assert on_record.state == "cancelled"
    assert parent.id in on_record.error and "cancelled" in on_record.error
    app.clock.advance("2m")
    assert app.drain() == 0


def test_dep01_fan_in_with_one_failed_parent_is_cancelled(app, clock):
    good = app.enqueue("step", {"name": "good"})
    bad = app.enqueue("broken", {"name": "bad"})
    child = app.enqueue("step", {"name": "child"}, after=[good, bad])
    app.drain()
    clock.advance("1h")
    app.drain()
    on_record = app.get(child.id)
    assert on_record.state == "cancelled" and bad.id in on_record.error
    assert "child" not in app.ran


def test_dep01_a_missing_parent_is_a_clear_error_at_enqueue(app):
    with pytest.raises(JobNotFound, match="no-such-job"):
        app.enqueue("step", {"name": "orphan"}, after="no-such-job", id="orphan")
    assert app.get("orphan") is None
    assert app.jobs() == []


def test_dep01_a_parent_done_already_makes_the_child_due_at_once(app):
    parent = app.enqueue("step", {"name": "parent"})
    assert app.drain() == 1
    child = app.enqueue("step", {"name": "child"}, after=parent.id)
    assert app.get(child.id).state == "waiting"
    assert app.drain() == 1
    assert app.ran == ["parent", "child"]


def test_dep01_a_parent_failed_already_cancels_the_child_at_enqueue(app, clock):
    parent = app.enqueue("broken", {"name": "parent"})
    app.drain()
    clock.advance("1h")
    app.drain()
    child = app.enqueue("step", {"name": "child"}, after=parent)
    on_record = app.get(child.id)
    assert on_record.state == "cancelled" and parent.id in on_record.error


def test_dep01_the_child_becomes_due_at_once_when_its_parent_succeeds(app, clock):
    parent = app.enqueue("step", {"name": "parent"}, delay="5m")
    child = app.enqueue("step", {"name": "child"}, after=parent)
    clock.advance("5m")
    assert app.drain() == 2  # the child was due the moment its parent was done
    done = app.get(child.id)
    assert done.state == "done"
    assert done.executions[0].started_at == clock.now()


def test_dep01_watch_shows_blocked_then_the_end(app):
    parent = app.enqueue("step", {"name": "parent"})
    child = app.enqueue("step", {"name": "child"}, after=parent)
    assert next(iter(app.watch(child.id, timeout=1))).state == "blocked"
    app.drain()
    assert [j.state for j in app.watch(child.id, timeout=1)] == ["done"]
