"""Rows of the PostgreSQL store turned into Job snapshots, their columns found by name.

A snapshot query returns the columns of sqlfiles.COLUMNS first (the `{cols}` / `{jcols}`
placeholders write that list, so the SQL and the indices below follow one tuple), then a tail
of its own, named by `tail()` beside the code that reads it. Indices are computed once, at
import: reading a row by them costs what a tuple index costs, where a row factory (namedtuple,
dict) would build an object per row on the worker's hot path."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...job import Execution, Job
from ..rules import reported_state
from .sqlfiles import COLUMNS

NCOLS = len(COLUMNS)
_AT = {name: i for i, name in enumerate(COLUMNS)}

ID = _AT["id"]
TASK = _AT["task"]
QUEUE = _AT["queue"]
PAYLOAD = _AT["payload"]
STATE = _AT["state"]
PRIORITY = _AT["priority"]
ATTEMPTS = _AT["attempts"]
MAX_ATTEMPTS = _AT["max_attempts"]
DUE = _AT["due"]
CREATED_AT = _AT["created_at"]
STARTED_AT = _AT["started_at"]
FINISHED_AT = _AT["finished_at"]
ERROR = _AT["error"]
RESULT = _AT["result"]
KEY = _AT["key"]
GRP = _AT["grp"]
AFTER_IDS = _AT["after_ids"]
CANCEL_REQUESTED = _AT["cancel_requested"]


def tail(*names: str) -> dict[str, int]:
    """The indices of the columns a query returns after COLUMNS, by name, in its SELECT order."""
    return {name: NCOLS + i for i, name in enumerate(names)}


def to_job(row: Sequence[Any], now: float, created: bool = True, ahead: int | None = None) -> Job:
    """A Job from a row starting with COLUMNS."""
    result = row[RESULT]
    return Job(
        id=row[ID],
        task=row[TASK],
        queue=row[QUEUE],
        args=json.loads(row[PAYLOAD]),
        state=reported_state(row[STATE], row[DUE], now),
        priority=row[PRIORITY],
        attempts=row[ATTEMPTS],
        max_attempts=row[MAX_ATTEMPTS],
        due_at=row[DUE],
        created_at=row[CREATED_AT],
        started_at=row[STARTED_AT],
        finished_at=row[FINISHED_AT],
        error=row[ERROR],
        result=None if result is None else json.loads(result),
        key=row[KEY],
        group=row[GRP],
        after=tuple(row[AFTER_IDS] or ()),
        ahead=ahead,
        created=created,
        cancel_requested=bool(row[CANCEL_REQUESTED]),
    )


def to_execution(row: Sequence[Any]) -> Execution:
    """An Execution from a row of the `executions` query (its columns are Execution's fields)."""
    return Execution(*row)
