"""Job events rendered by tinyjobs.joblog: the very lines structlog's chain writes, and
structlog itself whenever the output is not tinyjobs' JSON lines."""

from __future__ import annotations

import io
import json

import pytest
import structlog

from tinyjobs import log
from tinyjobs.job import Job
from tinyjobs.joblog import JobLoggers, JsonJobLogger


@pytest.fixture(autouse=True)
def _reset_structlog():
    yield
    structlog.reset_defaults()


class Custom:
    def __structlog__(self) -> str:
        return "custom view"


JOB = Job('01J/\u00e9"x', "t\u00e2sk", "mail", {}, "running", attempts=3)
EVENTS = [
    ("info", "job.started", {}),
    ("info", "job.done", {"seconds": 0.000123}),
    ("warning", "job.retrying", {"delay": 1.5, "error": 'ValueError: "bad"\nline \u00e9'}),
    ("error", "job.failed", {"error": None}),
    ("info", "job.snoozed", {"delay": 2}),
    ("info", "odd", {"n": True, "big": 10**30, "nan": float("nan"), "inf": -float("inf"), "l": [1, "a"]}),
    ("info", "custom", {"c": Custom(), "o": object}),
    ("debug", "job.debug", {}),
    ("info", "clash", {"attempt": 9, "pid": 1}),  # fields named like fixed ones: structlog's order
]


def lines(make, monkeypatch, level=10) -> list[str]:
    monkeypatch.setattr(log.time, "time", lambda: 1704067199.25)
    stream = io.StringIO()
    log.configure(json=True, stream=stream, level=level)
    logger = make()
    for method, event, fields in EVENTS:
        getattr(logger, method)(event, **fields)
    return stream.getvalue().splitlines()


def test_the_lines_are_structlogs_to_the_character(monkeypatch):
    fast = lines(lambda: JobLoggers(pid=7)(JOB), monkeypatch)
    slow = lines(lambda: log.get_logger(pid=7).bind(**log.job_fields(JOB)), monkeypatch)
    assert len(fast) == len(EVENTS)
    assert fast == slow
    assert json.loads(fast[0]) == {
        "pid": 7,
        "job_id": JOB.id,
        "task": JOB.task,
        "queue": "mail",
        "attempt": 3,
        "event": "job.started",
        "level": "info",
        "timestamp": "2023-12-31T23:59:59.250000Z",
    }


def test_the_level_filters_as_structlogs(monkeypatch):
    fast = lines(lambda: JobLoggers(pid=7)(JOB), monkeypatch, level=30)
    assert [json.loads(line)["event"] for line in fast] == ["job.retrying", "job.failed"]


def test_without_tinyjobs_json_lines_structlog_renders():
    log.configure(json=False, stream=io.StringIO())
    assert not isinstance(JobLoggers(pid=7)(JOB), JsonJobLogger)
    log.configure(json=True, stream=io.StringIO())
    assert isinstance(JobLoggers(pid=7)(JOB), JsonJobLogger)
    with structlog.testing.capture_logs() as events:
        JobLoggers(pid=7)(JOB).info("job.started")
    assert events == [
        {
            "pid": 7,
            "job_id": JOB.id,
            "task": JOB.task,
            "queue": "mail",
            "attempt": 3,
            "event": "job.started",
            "log_level": "info",
        }
    ]
