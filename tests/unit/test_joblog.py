"""Job events rendered by tinyjobs.joblog: the very lines structlog's chain writes, and
structlog itself whenever the output is not tinyjobs' JSON lines."""

from __future__ import annotations

import io
import json

import pytest
import structlog

from tinyjobs import joblog, log
from tinyjobs.execution import done, handed_back
from tinyjobs.job import Job
from tinyjobs.joblog import JobLoggers, JsonJobLogger, log_ending, log_started
from tinyjobs.stores.base import Claimed


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


def worker_lines(make, monkeypatch, level: int = 10) -> list[str]:
    """The lines of one job's run as a worker logs them (joblog.log_started, log_ending)."""
    monkeypatch.setattr(log.time, "time", lambda: 1704067199.25)
    monkeypatch.setattr(joblog.time, "monotonic", lambda: 100.0001235)
    stream = io.StringIO()
    log.configure(json=True, stream=stream, level=level)
    logger = make()
    claimed = Claimed(JOB, "token", 30.0)
    log_started(logger)
    log_ending(logger, done(claimed, "null"), True, 100.0, False)
    log_ending(logger, handed_back(claimed), True, 100.0, True)
    if isinstance(logger, JsonJobLogger):
        logger.done(float("nan"))  # not JSON's: the general path's text
        logger.done(5)  # an int: likewise
    else:
        logger.info("job.done", seconds=float("nan"))
        logger.info("job.done", seconds=5)
    return stream.getvalue().splitlines()


def test_a_workers_job_lines_are_structlogs_to_the_character(monkeypatch):
    fast = worker_lines(lambda: JobLoggers(pid=7)(JOB), monkeypatch)
    slow = worker_lines(lambda: log.get_logger(pid=7).bind(**log.job_fields(JOB)), monkeypatch)
    assert [json.loads(line)["event"] for line in fast] == ["job.started", "job.done", "job.handed_back"] + [
        "job.done"
    ] * 2
    assert json.loads(fast[1])["seconds"] == 0.000124
    assert fast == slow
    assert worker_lines(lambda: JobLoggers(pid=7)(JOB), monkeypatch, level=30) == []


def test_a_context_field_named_seconds_goes_through_structlog(monkeypatch):
    fast = worker_lines(lambda: JobLoggers(pid=7, seconds="ctx")(JOB), monkeypatch)
    slow = worker_lines(lambda: log.get_logger(pid=7, seconds="ctx").bind(**log.job_fields(JOB)), monkeypatch)
    assert fast == slow
