"""Structured logs through structlog: one event per line, JSON when stdout is not a terminal,
readable colours when it is, and journald's native protocol when $JOURNAL_STREAM says stdout or
stderr is the journal. `configure()` is called once per process (after a fork too)."""

from __future__ import annotations

import json as jsonlib
import logging
import os
import sys
import threading
import time
from collections import deque
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from . import journald

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def level_from_env() -> int:
    name = os.environ.get("TINYJOBS_LOG_LEVEL", "info").lower()
    return _LEVELS.get(name, logging.INFO)


_buffered: LineLogger | None = None  # the logger whose lines wait for flush(), when buffered
_json_lines: JsonLines | None = None  # where configure() sends JSON lines, when it does


class LineLogger:
    """Writes each rendered event as one line. Unbuffered, each line is written and flushed at
    once. Buffered, lines wait here until `flush()` (a worker calls it once per turn of its loop)
    and go out in one write, so a busy worker makes one write per batch of jobs, not two per
    job. They wait here, not in the stream's buffer, because that buffer writes every line
    through when Python runs unbuffered ($PYTHONUNBUFFERED, common in containers).

    Errors are not held: each goes out at once with the lines before it, because a process that
    fails may end with os._exit right after logging why, flushing only sys.stdout.

    A line is added without a lock (a deque's append is atomic), so the threads that log (a
    worker's slots and its loop, two lines a job) never wait for one another, nor for a write
    in progress (the stream's write lets go of the GIL: a thread that waited for the lock then
    slept and was woken, a few µs of CPU each). The lock orders the writes alone: a writer
    takes the lines waiting when it has it, oldest first, and lines added meanwhile go with
    the next write."""

    MAX_PENDING = 1000  # a turn that logs more lines than this writes them early

    def __init__(self, stream: Any, buffered: bool) -> None:
        self._stream, self._buffered = stream, buffered
        self._lock = threading.Lock()
        self._pending: deque[str] = deque()

    def msg(self, message: str) -> None:
        pending = self._pending
        pending.append(message)
        if not self._buffered or len(pending) >= self.MAX_PENDING:
            self.flush()

    def error(self, message: str) -> None:
        self._pending.append(message)
        self.flush()

    def flush(self) -> None:
        """Write the waiting lines, if any, in one write."""
        if self._pending:
            with self._lock:
                self._write()

    def _write(self) -> None:
        # Under the lock. The lines are taken before writing: a broken stream loses them once,
        # it does not make them pile up. None may be there any more (another writer took them).
        pending = self._pending
        lines = [pending.popleft() for _ in range(len(pending))]
        if lines:
            lines.append("")
            self._stream.write("\n".join(lines))
            self._stream.flush()

    debug = info = warning = warn = log = msg
    critical = exception = fatal = error


class IsoTimeStamper:
    """structlog processor: `timestamp`, the time of the event in ISO 8601 UTC with
    microseconds ("2026-01-31T12:00:00.123456Z"), as TimeStamper(fmt="iso", utc=True) gives.

    Why not TimeStamper: it builds a datetime and formats all of it per event, and a worker logs
    two events per job; here the part up to the second is formatted once per second and each
    event adds only its fraction. Safe from any thread: the cache is one tuple, swapped whole."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")

    def __call__(self, logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
        event_dict["timestamp"] = self.now()
        return event_dict

    def now(self) -> str:
        """The time now, as the processor writes it."""
        # Rounded to the microsecond as datetime does; a fraction that rounds up to a whole
        # second carries into it.
        second, micro = divmod(round(time.time() * 1_000_000), 1_000_000)
        cached, prefix = self._second
        if second != cached:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
            self._second = (second, prefix)
        return f"{prefix}{micro:06d}Z"


def _json_fallback(value: Any) -> Any:
    """What JSON cannot hold, as structlog's JSONRenderer shows it: `__structlog__()` or repr."""
    try:
        return value.__structlog__()
    except AttributeError:
        return repr(value)


# One encoder for every event: json.dumps(..., default=...) builds a new encoder per call.
encode_json = jsonlib.JSONEncoder(default=_json_fallback).encode


def render_json(logger: WrappedLogger, method: str, event_dict: EventDict) -> str:
    """structlog's last processor for JSON lines: the same text as JSONRenderer(), cheaper."""
    return encode_json(event_dict)


def flush() -> None:
    """Write out buffered log lines (nothing to do when logging is not buffered)."""
    if _buffered is not None:
        try:
            _buffered.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stdout must not stop a worker


def configure(
    *, json: bool | None = None, level: int | None = None, stream: Any = None, buffered: bool = False
) -> None:
    """Set up structlog for this process: journald's native protocol when $JOURNAL_STREAM
    names stdout or stderr (and no stream or format is forced), else JSON lines unless the
    stream is a terminal. `buffered` (for workers, which call `flush()` every turn) holds lines
    until then; a terminal is never buffered."""
    global _buffered, _json_lines
    _json_lines = None
    if stream is None and json is None and journald.stream_is_journal():
        _buffered = None
        _configure_journald(level)
        return
    stream = stream or sys.stdout
    if json is None:
        json = not (hasattr(stream, "isatty") and stream.isatty())
    buffered = buffered and not (hasattr(stream, "isatty") and stream.isatty())
    logger = LineLogger(stream, buffered)
    _buffered = logger if buffered else None
    renderer: Processor = render_json if json else structlog.dev.ConsoleRenderer(colors=True)
    stamper = IsoTimeStamper()
    processors: list[Processor] = [
        structlog.processors.add_log_level,
        stamper,
        structlog.processors.format_exc_info,
        renderer,
    ]
    level = level or level_from_env()
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *args: logger,
        cache_logger_on_first_use=False,
    )
    if json:
        _json_lines = JsonLines(logger, level, stamper.now, structlog.get_config())


def _configure_journald(level: int | None) -> None:
    sender = journald.JournalSender()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            journald.to_fields,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level or level_from_env()),
        logger_factory=lambda *args: journald.JournalLogger(sender, sys.stdout),
        cache_logger_on_first_use=False,
    )


def get_logger(**context: Any) -> Any:
    """A logger bound to `context` (e.g. pid, worker)."""
    return structlog.get_logger("tinyjobs").bind(**context)


class JsonLines:
    """What configure() set up for JSON lines, for loggers that render their lines themselves
    (tinyjobs.joblog): the line logger, the level, the clock, and the structlog configuration,
    to tell whether it is still in force (tests capture events by reconfiguring structlog)."""

    def __init__(self, sink: LineLogger, level: int, now: Any, config: dict[str, Any]) -> None:
        self.sink, self.level, self.now = sink, level, now
        self._processors = list(config["processors"])
        self._factory, self._wrapper = config["logger_factory"], config["wrapper_class"]

    def in_force(self) -> bool:
        config = structlog.get_config()
        return (
            config["logger_factory"] is self._factory
            and config["wrapper_class"] is self._wrapper
            and config["processors"] == self._processors
        )


def json_lines() -> JsonLines | None:
    """The JSON lines output configure() set up, while structlog still uses it; else None."""
    out = _json_lines
    return out if out is not None and out.in_force() else None


def job_fields(job: Any) -> dict[str, Any]:
    """The fields every job event carries: id, task, queue and attempt."""
    return {"job_id": job.id, "task": job.task, "queue": job.queue, "attempt": job.attempts}
