"""Rows of the PostgreSQL store turned into Job snapshots. Query rows start with the columns of
sqlfiles.COLUMNS, followed by the operation's clock (`now`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...job import BLOCKED, RUNNING, SCHEDULED, WAITING, Execution, Job
from .sqlfiles import COLUMNS

NCOLS = len(COLUMNS)


def reported_state(state: str, due: float, now: float) -> str:
    if state == "pending":
        return SCHEDULED if due > now else WAITING
    return state


def to_job(row: Sequence[Any], now: float, created: bool = True, ahead: int | None = None) -> Job:
    """A Job from a row starting with COLUMNS."""
    (
        id_,
        task,
        queue,
        payload,
        state,
        priority,
        attempts,
        max_attempts,
        due,
        created_at,
        started_at,
        finished_at,
        error,
        result,
        key,
        grp,
        after_ids,
        cancel_requested,
        _seq,
    ) = row[:NCOLS]
    return Job(
        id=id_,
        task=task,
        queue=queue,
        args=json.loads(payload),
        state=reported_state(state, due, now),
        priority=priority,
        attempts=attempts,
        max_attempts=max_attempts,
        due_at=due,
        created_at=created_at,
        started_at=started_at,
        finished_at=finished_at,
        error=error,
        result=None if result is None else json.loads(result),
        key=key,
        group=grp,
        after=tuple(after_ids or ()),
        ahead=ahead,
        created=created,
        cancel_requested=bool(cancel_requested),
    )


def to_execution(row: Sequence[Any]) -> Execution:
    attempt, host, pid, started_at, ended_at, outcome, error = row
    return Execution(attempt, host, pid, started_at, ended_at, outcome, error)


__all__ = ["BLOCKED", "RUNNING", "NCOLS", "reported_state", "to_execution", "to_job"]
