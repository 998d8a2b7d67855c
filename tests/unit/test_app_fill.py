"""`filled` copies a NewJob template by hand (it runs once per job): every field must reach the job."""

from __future__ import annotations

import dataclasses

import pytest

from tinyjobs.stores.base import NewJob, filled

# A value of each field's type that no default has, so a field left to its default shows.
SAMPLES: dict[str, object] = {
    "str": "s-sample",
    "str | None": "n-sample",
    "int": 7,
    "float": 12.5,
    "float | None": 99.25,
    "tuple[str, ...]": ("a", "b"),
}


def test_fill_copies_every_field_of_newjob():
    template_values = {}
    for f in dataclasses.fields(NewJob):
        kind = str(f.type)  # the annotation as written (the module defers annotations)
        assert kind in SAMPLES, f"NewJob.{f.name}: add a sample value for {kind} to this test"
        template_values[f.name] = SAMPLES[kind]
        assert f.default is dataclasses.MISSING or f.default != SAMPLES[kind]
    template = NewJob(**template_values)

    made = filled(template, "the-id", '{"x": 1}')

    assert made == dataclasses.replace(template, id="the-id", payload='{"x": 1}')


def test_filled_builds_what_the_constructor_builds():
    # stores.base.filled copies the template's instance dict: that holds while NewJob keeps
    # its __dict__ and has no __post_init__ (nothing derived from the fields it sets).
    assert not hasattr(NewJob, "__post_init__") and not hasattr(NewJob, "__slots__")
    template = NewJob(id="", task="t", queue="q", priority=2, after=("a",), key="k")
    made = filled(template, "the-id", '{"n":1}')
    built = NewJob(id="the-id", task="t", queue="q", payload='{"n":1}', priority=2, after=("a",), key="k")
    assert type(made) is NewJob
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert dataclasses.asdict(made) == dataclasses.asdict(built)
    assert template.id == "" and template.payload == "{}"  # the template is left as it was
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.id = "other"  # type: ignore[misc]
