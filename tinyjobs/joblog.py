"""Loggers for job events (`job.started`, `job.done`, ...), two lines per job on a worker's hot
path: the same lines as structlog writes, rendered here directly when they are JSON lines.

structlog spends about 8 µs per event (it copies the bound context, runs four processors, and
encodes the whole dict); a worker logs two events per job. A job's line begins with the same
fields every time (the worker's context, then job_id, task, queue, attempt), so that beginning is
encoded once per job and each event only appends its own fields, its name, level and time. The
text is exactly what structlog's chain in tinyjobs.log writes (tests/unit/test_joblog.py holds
the two side by side). Anything else (journald, a terminal, another structlog configuration such
as the tests' capture_logs, an `exc_info`, a field named like a fixed one) goes through structlog.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any

from . import log
from .job import last_line

if TYPE_CHECKING:
    from .execution import Ending

_encode_str = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
_FIXED = frozenset(("job_id", "task", "queue", "attempt", "event", "level", "timestamp"))
_STRUCTLOG_ONLY = frozenset(("exc_info", "exception", "stack_info"))
# A line's end up to its time, by (level, event): the few events a worker logs, encoded once.
_TAILS: dict[tuple[str, str], str] = {}
# The two lines of every job's run, their ends written out once: see JsonJobLogger.started.
_STARTED = ', "event": "job.started", "level": "info", "timestamp": "'
_DONE = ', "event": "job.done", "level": "info", "timestamp": "'


def _value(value: Any) -> str:
    """`value` in JSON as the encoder of tinyjobs.log writes it, the common types first."""
    kind = type(value)
    if kind is str:
        return _encode_str(value)  # type: ignore[no-any-return]
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return log.encode_json(value)


class JobLoggers:
    """Makes each job's logger: `context` (the worker's, e.g. pid), then the job's fields."""

    def __init__(self, **context: Any) -> None:
        self.context = context
        self._structlog = log.get_logger(**context)
        self._reserved = _FIXED | _STRUCTLOG_ONLY | context.keys()
        self._opening = log.encode_json(context)[:-1] + (", " if context else "")

    def __call__(self, job: Any) -> Any:
        """The logger of `job`'s events; its methods are structlog's: `info(event, **fields)`."""
        out = log.json_lines()
        if out is None:
            return self._structlog.bind(**log.job_fields(job))
        job_id, task, queue, attempt = job.id, job.task, job.queue, job.attempts
        if type(job_id) is str and type(task) is str and type(queue) is str and type(attempt) is int:
            # The usual types, encoded here: four calls of _value less per job.
            head = (
                f'{self._opening}"job_id": {_encode_str(job_id)}, "task": {_encode_str(task)}, '
                f'"queue": {_encode_str(queue)}, "attempt": {int.__repr__(attempt)}'
            )
        else:
            head = (
                f'{self._opening}"job_id": {_value(job_id)}, "task": {_value(task)}, '
                f'"queue": {_value(queue)}, "attempt": {_value(attempt)}'
            )
        return JsonJobLogger(self, job, out, head)

    def bound(self, job: Any) -> Any:
        """`job`'s logger through structlog."""
        return self._structlog.bind(**log.job_fields(job))


class JsonJobLogger:
    """One job's events as JSON lines, written to the line logger configure() set up."""

    __slots__ = ("_loggers", "_job", "_out", "_head")

    def __init__(self, loggers: JobLoggers, job: Any, out: log.JsonLines, head: str) -> None:
        self._loggers, self._job, self._out, self._head = loggers, job, out, head

    def started(self) -> None:
        """`info("job.started")`, the same line, written without the general path's steps
        (the keyword dict, the level's and the tail's look-ups): two lines a job, in a drain
        of thousands a second, are a good part of a worker's own CPU."""
        out = self._out
        if out.level <= 20:
            out.sink.msg(f'{self._head}{_STARTED}{out.now()}"}}')

    def done(self, seconds: float) -> None:
        """`info("job.done", seconds=seconds)`, the same line, as `started` writes its own."""
        out = self._out
        if out.level > 20:
            return
        if type(seconds) is not float or not math.isfinite(seconds) or "seconds" in self._loggers._reserved:
            self._emit("info", "job.done", {"seconds": seconds})
            return
        out.sink.msg(f'{self._head}, "seconds": {float.__repr__(seconds)}{_DONE}{out.now()}"}}')

    def debug(self, event: str, **fields: Any) -> None:
        self._emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit("error", event, fields)

    def _emit(self, level: str, event: str, fields: dict[str, Any]) -> None:
        out = self._out
        number = _LEVELS[level]
        if number < out.level:
            return
        extra = ""
        if fields:
            if not self._loggers._reserved.isdisjoint(fields):
                getattr(self._loggers.bound(self._job), level)(event, **fields)
                return
            extra = "".join([f", {_encode_str(key)}: {_value(value)}" for key, value in fields.items()])
        tail = _TAILS.get((level, event))
        if tail is None:
            tail = f', "event": {_value(event)}, "level": "{level}", "timestamp": "'
            if len(_TAILS) < 256:  # event names are a few constants; anything else is not kept
                _TAILS[level, event] = tail
        line = f'{self._head}{extra}{tail}{out.now()}"}}'

        if number >= 40:
            out.sink.error(line)  # as structlog hands errors on: written at once
        else:
            out.sink.msg(line)


def log_started(logger: Any) -> None:
    """`job.started`, through `logger` (a JsonJobLogger's own line, or structlog's)."""
    if type(logger) is JsonJobLogger:
        logger.started()
    else:
        logger.info("job.started")


def log_ending(logger: Any, ending: Ending, ok: bool, started: float, held: bool) -> None:
    """One event per settled attempt, `job.<verdict>` (`job.done` with its seconds from
    `started`, monotonic), or `job.lease_lost` when the store refused the settlement because
    the lease was gone. `held`: a job claimed ahead and handed back without having started."""
    settlement, verdict = ending.settlement, ending.verdict
    if not ok:
        logger.warning("job.lease_lost")
    elif verdict == "done":
        seconds = round(time.monotonic() - started, 6)
        if type(logger) is JsonJobLogger:
            logger.done(seconds)
        else:
            logger.info("job.done", seconds=seconds)
    elif verdict == "failed":
        logger.error("job.failed", error=last_line(settlement.error))
    elif verdict == "retrying":
        logger.warning("job.retrying", delay=round(settlement.delay, 3), error=last_line(settlement.error))
    elif verdict == "snoozed":
        logger.info("job.snoozed", delay=settlement.delay)
    elif held:
        logger.info("job.handed_back", started=False)  # claimed ahead, never run
    else:
        logger.info("job.handed_back")
