"""Structured logs through structlog: one event per line, JSON when stdout is not a terminal,
readable colours when it is, and journald's native protocol when $JOURNAL_STREAM says stdout or
stderr is the journal. `configure()` is called once per process (after a fork too)."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

import structlog

from . import journald

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def level_from_env() -> int:
    name = os.environ.get("TINYJOBS_LOG_LEVEL", "info").lower()
    return _LEVELS.get(name, logging.INFO)


_buffered: Any = None  # the stream whose lines wait for flush(), when configured buffered


class LineLogger:
    """Writes each rendered event as one line. Unbuffered, each line is flushed at once;
    buffered, lines wait in the stream's buffer until `flush()` (a worker calls it once per turn
    of its loop), so a busy worker makes one write per batch of jobs, not two per job."""

    def __init__(self, stream: Any, buffered: bool) -> None:
        self._stream, self._buffered = stream, buffered
        self._lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            self._stream.write(message + "\n")
            if not self._buffered:
                self._stream.flush()

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


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
    global _buffered
    if stream is None and json is None and journald.stream_is_journal():
        _buffered = None
        _configure_journald(level)
        return
    stream = stream or sys.stdout
    if json is None:
        json = not (hasattr(stream, "isatty") and stream.isatty())
    buffered = buffered and not (hasattr(stream, "isatty") and stream.isatty())
    _buffered = stream if buffered else None
    logger = LineLogger(stream, buffered)
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=True)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level or level_from_env()),
        logger_factory=lambda *args: logger,
        cache_logger_on_first_use=False,
    )


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


def job_fields(job: Any) -> dict[str, Any]:
    """The fields every job event carries: id, task, queue and attempt."""
    return {"job_id": job.id, "task": job.task, "queue": job.queue, "attempt": job.attempts}
