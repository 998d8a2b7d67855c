"""A few statements sent to the server in one write, their results read back in one wait:
libpq's pipeline mode driven directly (psycopg.pq), for the single enqueue.

psycopg's own pipeline flushes the socket at every `execute`: the single enqueue's BEGIN, INSERT,
COMMIT and wake-up left as four writes and a Sync, each a sendto on the client and a wake-up of
the server's backend, with psycopg's per-statement work around each (one write instead saves
~170 us of client CPU and ~50 us of the server's per enqueue: docs/measured.md, "pg-enqueue").
Here the statements are queued in libpq's
buffer and leave with the Sync in one write; the server answers them all, and the client waits
once. What a statement needs from the client is given as text (str, int and float; repr of a
float reads back exactly) or, as bytes, in binary format (packed.py's arrays: the worker's
cycle, cycle.py); results come back in binary.

Each statement is prepared once per connection (`Prepared`: its Parse leaves in the same
write as its first use), so the server plans it once per session, as psycopg's automatic
preparation does for the other statements (and with the same limit: a pooler that drops a
session's prepared statements behind its back, PgBouncer before 1.21 in transaction mode, fails
both)."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg import pq
from psycopg.waiting import Ready, Wait

Param = str | int | float | bytes | None  # bytes: a value in binary format (packed.py's arrays)

# libpq's codes as plain ints: an enum member's lookup and comparison, a few per statement,
# cost about an eighth of an exchange's instructions (the codes are libpq's, fixed).
_OK = (int(pq.ExecStatus.COMMAND_OK), int(pq.ExecStatus.TUPLES_OK))
_FATAL = int(pq.ExecStatus.FATAL_ERROR)
_SYNC = int(pq.ExecStatus.PIPELINE_SYNC)
_BINARY = int(pq.Format.BINARY)
_PIPELINE_OFF = int(pq.PipelineStatus.OFF)
_CONNECTION_OK = int(pq.ConnStatus.OK)

# The names prepared on each connection (by this module; psycopg's own are `_pg3_<n>`).
_prepared: weakref.WeakKeyDictionary[psycopg.Connection, set[bytes]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Prepared:
    """A statement with $n parameters of the given type oids, prepared under a name derived
    from its text (two texts never share a name, whatever schema they were composed for)."""

    text: str
    types: tuple[int, ...]
    name: bytes = field(init=False)
    sql: bytes = field(init=False)

    def __post_init__(self) -> None:
        sql = self.text.encode()
        object.__setattr__(self, "sql", sql)
        object.__setattr__(self, "name", b"tinyjobs_" + hashlib.sha1(sql).hexdigest()[:16].encode())


def exchange(conn: psycopg.Connection, statements: Sequence[tuple[Prepared, Sequence[Param]]]) -> list[Any]:
    """Send `statements` in one write, each with its parameters, and return the result of
    each (a psycopg.pq PGresult, binary format), in order. Raises the first statement's error
    as psycopg raises it (psycopg.errors.UniqueViolation, ...); the statements after a failed
    one are skipped by the server, and a transaction they were in is left aborted (the caller
    rolls it back). The connection is idle (autocommit, no psycopg pipeline) before and after."""
    pgconn = conn.pgconn
    known = _prepared.get(conn)
    if known is None:  # get first: setdefault makes a weak reference at every call
        known = _prepared.setdefault(conn, set())
    encoded = [(stmt, *_encoded(params)) if params else (stmt, [], None) for stmt, params in statements]
    parsing: list[bytes | None] = []  # per reply owed: the name a Parse prepares, None for a statement
    synced = False
    pgconn.enter_pipeline_mode()
    try:
        for stmt, values, formats in encoded:
            if stmt.name not in known and stmt.name not in parsing:
                pgconn.send_prepare(stmt.name, stmt.sql, stmt.types)
                parsing.append(stmt.name)
            pgconn.send_query_prepared(stmt.name, values, param_formats=formats, result_format=_BINARY)
            parsing.append(None)
        pgconn.pipeline_sync()
        synced = True
        replies = conn.wait(_replies(pgconn))
    finally:
        if pgconn.pipeline_status != _PIPELINE_OFF and pgconn.status == _CONNECTION_OK:
            _drain(conn, synced)
    if len(replies) != len(parsing):
        raise psycopg.OperationalError(f"{len(parsing)} replies owed by the server, {len(replies)} read")
    results: list[Any] = []
    error = None
    for name, reply in zip(parsing, replies, strict=True):
        status = None if reply is None else reply.status
        ok = status in _OK
        if status == _FATAL and error is None:
            error = pgerrors.error_from_result(reply, encoding=conn.info.encoding)
        if name is None:
            results.append(reply)
        elif ok:
            known.add(name)
    if error is not None:
        raise error
    return results


def _drain(conn: psycopg.Connection, synced: bool) -> None:
    """Leave pipeline mode after a failure while results were still owed: end what was queued
    with a Sync if it had none yet, and read to it. A connection that cannot be brought back is
    closed (its caller sees it dropped)."""
    pgconn = conn.pgconn
    try:
        if not synced:
            pgconn.pipeline_sync()
        conn.wait(_replies(pgconn))
    except BaseException:  # closed: the caller's retry logic opens a new one
        pgconn.finish()


def _encoded(params: Sequence[Param]) -> tuple[list[bytes | None], list[int] | None]:
    """The parameters as libpq takes them, and their formats: binary for bytes, text for the
    rest (None: all text). One pass, the commonest types first (it runs for every parameter of
    every statement sent)."""
    values: list[bytes | None] = []
    add = values.append
    binary = False
    for value in params:
        if isinstance(value, str):
            if "\x00" in value:  # libpq reads a text parameter up to its first NUL: refuse it
                raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
            add(value.encode())
        elif value is None:
            add(None)
        elif type(value) is bytes:
            add(value)
            binary = True
        else:
            add(_text(value))
    if not binary:
        return values, None
    return values, [1 if type(p) is bytes else 0 for p in params]


def _text(value: Param) -> bytes | None:
    if value is None or type(value) is bytes:
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        if "\x00" in value:  # libpq reads a text parameter up to its first NUL: refuse it
            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return value.encode()
    if isinstance(value, float):
        return repr(value).encode()  # the shortest text that reads back as the same double
    return str(value).encode()


def _replies(pgconn: Any) -> Generator[Wait, Ready | int, list[Any]]:
    """A psycopg wait generator: flush what is queued, then read every result up to the
    pipeline's Sync; one entry per statement (its last result, or None when it returned none)
    and leave pipeline mode."""
    while pgconn.flush() != 0:
        while not (ready := (yield Wait.RW)):
            continue
        if ready & Ready.R:
            pgconn.consume_input()
    replies: list[Any] = []
    current = None
    while True:
        while pgconn.is_busy():
            while not (yield Wait.R):
                continue
            pgconn.consume_input()
        res = pgconn.get_result()
        if res is None:  # the end of one statement's results
            replies.append(current)
            current = None
        elif res.status == _SYNC:
            pgconn.exit_pipeline_mode()
            return replies
        else:
            current = res
