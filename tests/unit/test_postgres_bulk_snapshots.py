"""bulk.snapshots spells out rules.created_snapshot for the jobs COPY takes (pending, no key,
no parents): the two must build the same Job for each, whatever its due time, group, priority
and arguments, and a payload that is not one JSON value must fail as it fails alone."""

from __future__ import annotations

import json

import pytest

from tinyjobs.job import Job
from tinyjobs.stores.base import NewJob
from tinyjobs.stores.postgres.bulk import snapshots
from tinyjobs.stores.rules import created_snapshot

NOW = 1_700_000_000.25


def test_each_snapshot_is_the_rules_snapshot():
    jobs = [
        NewJob(id="a", task="t", payload='{"i":1}'),
        NewJob(id="b", task="u", queue="q2", payload='{"s":"x,y]","n":null}', priority=-3, group="g"),
        NewJob(id="c", task="t", payload="{}", delay=30, max_attempts=3),
        NewJob(id="d", task="t", payload='{"l":[1,{"k":2}]}', at=NOW - 5),
        NewJob(id="e", task="t", payload='{"f":1.5e300}', at=NOW),
    ]
    dues = [NOW + job.delay if job.at is None else job.at for job in jobs]
    built = snapshots(jobs, dues, NOW)
    assert built == [created_snapshot(job, due, NOW) for job, due in zip(jobs, dues, strict=True)]
    assert [job.state for job in built] == ["waiting", "waiting", "scheduled", "waiting", "waiting"]
    assert built[0].args is not built[2].args  # each job its own dict
    assert built[0].executions is not built[1].executions  # and its own list
    assert all(type(job) is Job for job in built)
    expected = [created_snapshot(job, due, NOW) for job, due in zip(jobs, dues, strict=True)]
    assert [repr(job) for job in built] == [repr(job) for job in expected]


def test_job_is_a_dataclass_snapshots_can_copy():
    # snapshots copies the instance dict of a Job built by its constructor: that holds while
    # Job keeps its __dict__ and derives nothing from its fields in a __post_init__.
    assert not hasattr(Job, "__post_init__") and not hasattr(Job, "__slots__")


@pytest.mark.parametrize("payloads", [['{"a":1}', "1,2"], ['{"a":1}', '{"b":'], ['{"a":1}', ""]])
def test_a_payload_that_is_not_one_json_value_fails_as_alone(payloads):
    jobs = [NewJob(id=str(i), task="t", payload=p) for i, p in enumerate(payloads)]
    with pytest.raises(json.JSONDecodeError):
        snapshots(jobs, [NOW] * len(jobs), NOW)
