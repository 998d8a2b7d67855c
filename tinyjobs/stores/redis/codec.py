"""Conversions between the store's values and what the Lua scripts take and return.

Job hash fields are documented in _lib.lua. Times travel as text written with %.17g, so the
floats read back are exactly the doubles the scripts computed."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ...errors import NotSupported
from ...job import Execution, Job, bound_error
from ..base import NewJob, QueuePolicy, Settlement
from ..rules import created_snapshot, reported_state, unknown_parent


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _float(value: str | None) -> float | None:
    return None if value is None else float(value)


def now_arg(now: float | None) -> str:
    """'' asks the script for the server's TIME (CLK-01); an explicit value is used as given."""
    return "" if now is None else repr(float(now))


def job_args(job: NewJob) -> list[str]:
    """The 13 values of one job, in the order enqueue_one reads them."""
    after = json.dumps(list(dict.fromkeys(job.after))) if job.after else ""
    return [
        job.id,
        job.task,
        job.queue,
        job.payload,
        str(int(job.priority)),
        repr(float(job.delay)),
        "" if job.at is None else repr(float(job.at)),
        _text(job.key),
        _text(job.group),
        after,
        str(int(job.max_attempts)),
        repr(float(job.dedupe)),
        repr(float(job.keep)),
    ]


def policy_args(policy: QueuePolicy) -> list[str]:
    rate = policy.rate or (None, None)
    group_rate = policy.group_rate or (None, None)
    return [
        policy.name,
        repr(float(policy.lease)),
        _text(policy.concurrency),
        _text(rate[0]),
        _text(rate[1]),
        _text(policy.group_concurrency),
        _text(group_rate[0]),
        _text(group_rate[1]),
    ]


def settlement_args(s: Settlement) -> list[str]:
    return [
        s.job_id,
        s.token,
        s.outcome,
        _text(s.result),
        _text(bound_error(s.error)),
        repr(float(s.delay)),
        _text(s.execution),
    ]


def pairs(flat: Sequence[str] | dict) -> dict[str, str]:
    """A dict from a flat [field, value, ...] list (an empty Lua table arrives as {})."""
    if not flat:
        return {}
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def from_hash(job_id: str, h: dict[str, str], now: float, created: bool = True) -> Job:
    """A Job snapshot from a job hash."""
    due = float(h["d"])
    return Job(
        id=job_id,
        task=h["t"],
        queue=h["q"],
        args=json.loads(h["p"]),
        state=reported_state(h["st"], due, now),
        priority=int(h["pr"]),
        attempts=int(h["a"]),
        max_attempts=int(h["ma"]),
        due_at=due,
        created_at=float(h["ca"]),
        started_at=_float(h.get("sa")),
        finished_at=_float(h.get("fa")),
        error=h.get("e"),
        result=json.loads(h["r"]) if "r" in h else None,
        key=h.get("k"),
        group=h.get("g"),
        after=tuple(json.loads(h["af"])) if "af" in h else (),
        created=created,
        cancel_requested=h.get("c") == "1",
    )


def from_new(job: NewJob, reply: list[Any], now: float) -> Job:
    """The snapshot of a job that enqueue just created, from its NewJob and the script's reply
    ['1', id, stored state, due, seq, error]."""
    return created_snapshot(job, float(reply[3]), now, reply[2], reply[5] or None)


def executions(entries: Sequence[str]) -> list[Execution]:
    """Executions from the list of start entries {a, h, p, s} and end entries {n, o, r}."""
    out: list[Execution] = []
    for raw in entries:
        e = json.loads(raw)
        if "a" in e:
            out.append(Execution(int(e["a"]), e["h"], int(e["p"]), float(e["s"])))
        elif out:
            out[-1] = replace(out[-1], ended_at=float(e["n"]), outcome=e.get("o"), error=e.get("r"))
    return out


# -- whole operations: their arguments and replies, shared by the sync and the async store ----

REFUSE_CONN = (
    "the Redis store cannot enqueue inside your transaction (conn=...): Redis has no "
    "transaction shared with your application's data. Enqueue after your commit, or "
    "use the PostgreSQL or SQLite store for jobs that must commit with your data."
)


def enqueue_args(jobs: Sequence[NewJob], now: float | None, conn: Any) -> list[str]:
    """The enqueue script's arguments; NotSupported for `conn` (JOB-02: Redis has none). One
    job goes as its 13 values (no JSON to write here or to decode in the script), a batch as
    one JSON argument."""
    if conn is not None:
        raise NotSupported(REFUSE_CONN)
    if len(jobs) == 1:
        return [now_arg(now), *job_args(jobs[0])]
    return [now_arg(now), json.dumps([job_args(job) for job in jobs], ensure_ascii=False)]


def enqueue_reply(jobs: Sequence[NewJob], reply: Any) -> list[Job]:
    """The snapshots from the enqueue script's reply, in order; JobNotFound for a missing
    parent (the script then wrote nothing)."""
    return [make() for make in enqueue_later(jobs, reply)]


def enqueue_later(jobs: Sequence[NewJob], reply: Any) -> list[Callable[[], Job]]:
    """`enqueue_reply` with each snapshot left to build: one call per job, in order (the async
    store's callers decode theirs a few per turn of the event loop: stores/aio.py Grouped).
    The reply is parsed and checked here, so what is left cannot fail on a missing parent."""
    if isinstance(reply, list):  # one job's {now, its result's values}, or a missing parent's
        if reply[0] == "!":
            raise unknown_parent(reply[2], reply[1])
        at, results = float(reply[0]), [reply[1:]]
    else:
        parsed = json.loads(reply)
        at, results = float(parsed[0]), parsed[1]
    out: list[Callable[[], Job]] = []
    for job, one in zip(jobs, results, strict=True):
        if one[0] == "1":
            out.append(functools.partial(from_new, job, one, at))
        else:
            out.append(functools.partial(_existing, one, at))
    return out


def _existing(one: list[Any], at: float) -> Job:
    return from_hash(one[1], pairs(one[2]), at, created=False)


def get_args(job_id: str, now: float | None, executions: bool) -> list[str]:
    return [now_arg(now), job_id, "1" if executions else "0"]


def get_reply(job_id: str, text: str) -> Job | None:
    """The snapshot from the get script's reply, or None."""
    reply = json.loads(text)
    if len(reply) == 1:
        return None
    job = from_hash(job_id, pairs(reply[1]), float(reply[0]))
    job.ahead = None if reply[2] < 0 else int(reply[2])
    job.executions = executions(reply[3])
    return job
