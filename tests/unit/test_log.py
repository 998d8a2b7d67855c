"""The JSON-lines logging a worker uses: its timestamp and its renderer, and the lines it writes."""

from __future__ import annotations

import io
import json
import sys
import threading
from datetime import UTC, datetime

import pytest
import structlog

from tinyjobs import log


@pytest.fixture(autouse=True)
def _reset_structlog():
    yield
    structlog.reset_defaults()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_the_timestamp_is_iso_utc_with_microseconds_and_follows_the_second(monkeypatch):
    # Across a second, a minute, a day and a year, where the cached part up to the second must
    # be formatted anew; one fraction rounds up into the next second, as datetime rounds it.
    times = [
        1704067198.5,
        1704067198.75,
        1704067199.0,
        1704067199.9921875,
        1704067199.99999975,
        1704067200.25,
    ]
    stamper = log.IsoTimeStamper()
    for ts in times:
        monkeypatch.setattr(log.time, "time", lambda ts=ts: ts)
        assert stamper(None, "info", {"event": "x"}) == {"event": "x", "timestamp": iso(ts)}
    assert iso(times[-2]) == "2024-01-01T00:00:00.000000Z"  # rounded up into the next second


def test_the_json_renderer_writes_what_structlogs_json_renderer_writes():
    class Custom:
        def __structlog__(self) -> str:
            return "custom view"

    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    event = {
        "pid": 7,
        "job_id": "01J",
        "attempt": 2,
        "seconds": 0.000123,
        "queues": ["a", "b"],
        "error": 'line "one"\nline two é',
        "none": None,
        "custom": Custom(),
        "opaque": Opaque(),
        "event": "job.done",
    }
    expected = structlog.processors.JSONRenderer()(None, "info", dict(event))
    assert log.render_json(None, "info", dict(event)) == expected
    assert json.loads(expected)["custom"] == "custom view"


def test_json_lines_carry_the_context_the_fields_the_level_and_the_time():
    stream = io.StringIO()
    log.configure(json=True, stream=stream)
    log.get_logger(pid=7).bind(job_id="j1", task="t", queue="q", attempt=1).warning("job.retrying", delay=2.0)
    (line,) = stream.getvalue().splitlines()
    event = json.loads(line)
    timestamp = event.pop("timestamp")
    assert event == {
        "pid": 7,
        "job_id": "j1",
        "task": "t",
        "queue": "q",
        "attempt": 1,
        "delay": 2.0,
        "event": "job.retrying",
        "level": "warning",
    }
    age = datetime.now(UTC) - datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert 0 <= age.total_seconds() < 5


class Stream(io.StringIO):
    """A stream that counts its writes and may write through like unbuffered stdout."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)

    def isatty(self) -> bool:
        return False


def test_buffered_lines_wait_for_flush_then_go_out_in_one_write():
    stream = Stream()  # writes through at once, like stdout under $PYTHONUNBUFFERED
    log.configure(json=True, stream=stream, buffered=True)
    logger = log.get_logger()
    for n in range(3):
        logger.info("job.started", n=n)
    assert (stream.getvalue(), stream.writes) == ("", 0)
    log.flush()
    assert [json.loads(line)["n"] for line in stream.getvalue().splitlines()] == [0, 1, 2]
    assert stream.writes == 1
    log.flush()
    assert stream.writes == 1  # nothing waited: no write


def test_an_error_goes_out_at_once_with_the_lines_before_it():
    stream = Stream()
    log.configure(json=True, stream=stream, buffered=True)
    logger = log.get_logger()
    logger.info("worker.started")
    logger.error("worker.crashed", error="boom")
    assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == [
        "worker.started",
        "worker.crashed",
    ]


def test_unbuffered_lines_go_out_one_by_one():
    stream = Stream()
    log.configure(json=True, stream=stream)
    log.get_logger().info("supervisor.starting")
    assert json.loads(stream.getvalue())["event"] == "supervisor.starting"


def test_lines_from_many_threads_each_go_out_once_in_their_order_while_others_flush():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch every few bytecodes: a race has its chances
    try:
        seen = log_from_threads(threads=4, per_thread=20000)
    finally:
        sys.setswitchinterval(interval)
    assert seen == {i: list(range(20000)) for i in range(4)}


def log_from_threads(threads: int, per_thread: int) -> dict[int, list[int]]:
    """Each thread's numbers, as written, by the lines of `threads` threads that each log
    `per_thread` lines straight to the line logger and flush now and then."""
    stream = Stream()
    log.configure(json=True, stream=stream, buffered=True)
    sink = log.json_lines().sink

    def write(name: int) -> None:
        for n in range(per_thread):
            sink.msg(f"{name} {n}")
            if n % 5 == 0:
                log.flush()

    workers = [threading.Thread(target=write, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    log.flush()
    seen: dict[int, list[int]] = {}
    for line in stream.getvalue().splitlines():
        name, n = map(int, line.split())
        seen.setdefault(name, []).append(n)
    return seen
