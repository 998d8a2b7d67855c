"""The single enqueue's client path spelled out for speed: rules.created_snapshot copies a Job's
instance dict, serialization.load calls json's C scanner directly, App._plain_job builds the one
NewJob of an enqueue without options. Each must give exactly what the plain way gives."""

from __future__ import annotations

import dataclasses
import json

import pytest

import tinyjobs
from tinyjobs.errors import BadArguments, PayloadTooLarge, SerializationError, UnknownTask
from tinyjobs.job import Job
from tinyjobs.serialization import dump_args, load
from tinyjobs.stores.base import NewJob
from tinyjobs.stores.rules import created_snapshot, reported_state

NOW = 1_700_000_000.25


def constructed(job: NewJob, due: float, now: float, state: str, error: str | None) -> Job:
    """What created_snapshot built before: Job(...) with every field spelled out."""
    return Job(
        id=job.id,
        task=job.task,
        queue=job.queue,
        args=json.loads(job.payload),
        state=reported_state(state, due, now),
        priority=job.priority,
        max_attempts=job.max_attempts,
        due_at=due,
        created_at=now,
        finished_at=now if state in ("done", "failed", "cancelled") else None,
        error=error,
        key=job.key,
        group=job.group,
        after=tuple(dict.fromkeys(job.after)),
    )


JOBS = [
    NewJob(id="a", task="t", payload='{"i":1,"t":1764700000.123456}'),
    NewJob(id="b", task="u", queue="q2", payload='{"s":"x"}', priority=-3, group="g", key="k"),
    NewJob(id="c", task="t", payload="{}", delay=30, max_attempts=3, after=("p", "q", "p")),
    NewJob(id="d", task="t", payload='{"l":[1,{"k":2}]}', at=NOW - 5, after=("p",)),
]
CASES = [
    (job, due, state, error)
    for job in JOBS
    for due in (NOW, NOW + 30)
    for state, error in (("pending", None), ("blocked", None), ("cancelled", "job 'p' failed"))
]


@pytest.mark.parametrize(("job", "due", "state", "error"), CASES)
def test_created_snapshot_is_the_constructors_job(job, due, state, error):
    made = created_snapshot(job, due, NOW, state, error)
    built = constructed(job, due, NOW, state, error)
    assert type(made) is Job
    assert made == built and repr(made) == repr(built)
    assert dataclasses.asdict(made) == dataclasses.asdict(built)


def test_each_snapshot_has_its_own_lists_and_the_template_stays_blank():
    # created_snapshot copies one Job's instance dict: that holds while Job keeps its __dict__
    # and derives nothing from its fields in a __post_init__.
    assert not hasattr(Job, "__post_init__") and not hasattr(Job, "__slots__")
    one, two = created_snapshot(JOBS[0], NOW, NOW), created_snapshot(JOBS[0], NOW, NOW)
    assert one.executions is not two.executions and one.args is not two.args
    one.executions.append("x")  # type: ignore[arg-type]
    one.state = "running"
    three = created_snapshot(JOBS[1], NOW, NOW)
    assert three.executions == [] and three.key == "k" and three.state == "waiting"
    assert created_snapshot(JOBS[0], NOW, NOW).key is None  # a key set before does not leak


TEXTS = [
    '{"i":1,"t":1764700000.123456}',
    '{"s":"é\\"\\n\\u00e9","n":null,"b":[true,false],"o":{"k":[1.5e300,-0.0]}}',
    "{}",
    "[]",
    "1",
    '"x"',
    "null",
    "NaN",
    ' {"a":1}',
    '{"a":1} ',
    '{"a":1}{"b":2}',
    "1,2",
    "",
    '{"a":',
    "{'a':1}",
    "[1,]",
]


@pytest.mark.parametrize("text", TEXTS)
def test_load_gives_what_json_loads_gives_or_raises(text):
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as err:
        with pytest.raises(json.JSONDecodeError) as caught:
            load(text)
        assert str(caught.value) == str(err)
        return
    got = load(text)
    assert repr(got) == repr(expected)  # repr: NaN and -0.0 compare as the same value too
    assert load(text.encode()) == expected or text == "NaN"
    assert load(None) is None


def app_with_tasks() -> tuple[tinyjobs.App, list[str]]:
    app = tinyjobs.App("memory://")

    @app.task
    def noop(run, i, t):
        return None

    @app.task(queue="q2", attempts=3, priority=4, keep="1h", dedupe="2h")
    def other(run, x=1, **more):
        return None

    return app, ["noop", "other"]


ARGS = [
    ("noop", {"i": 1, "t": 2.5}),
    ("other", {}),
    ("other", {"x": [1, {"k": "v"}], "y": "é"}),
    ("noop", {"i": 1}),  # missing t
    ("noop", {"i": 1, "t": 2, "u": 3}),  # unexpected u
    ("noop", {"i": float("nan"), "t": 1}),  # not JSON
    ("noop", {"i": object(), "t": 1}),
    ("noop", {"i": "x" * 2000, "t": 1}),  # over max_payload below
    ("nope", {}),  # unknown task
]


@pytest.mark.parametrize(("name", "args"), ARGS)
def test_plain_job_is_new_jobs_job_or_its_refusal(name, args):
    app, _ = app_with_tasks()
    app.max_payload = 1000
    try:
        [expected] = app.new_jobs([(name, args)], {})
    except (BadArguments, SerializationError, PayloadTooLarge, UnknownTask) as err:
        with pytest.raises(type(err)) as caught:
            app._plain_job(name, args)
        assert str(caught.value) == str(err)
        return
    made = app._plain_job(name, args)
    assert made.id != expected.id and len(made.id) == len(expected.id)
    assert made == dataclasses.replace(expected, id=made.id)
    assert made.payload == dump_args(args)


def test_a_single_enqueue_adds_the_job_new_jobs_describes():
    app, _ = app_with_tasks()
    job = app.tasks["other"].enqueue(x=5)
    assert (job.task, job.queue, job.args, job.priority, job.max_attempts) == ("other", "q2", {"x": 5}, 4, 3)
    assert app.get(job.id) == dataclasses.replace(job, ahead=0)  # a read counts the jobs ahead
