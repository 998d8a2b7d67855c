"""Connections of the PostgreSQL store: one per thread, opened lazily, never across a fork, in
autocommit mode: each transaction sends its own BEGIN and COMMIT, so that a pipeline can carry
them with its statements.

Each store operation runs as one transaction through `Connections.run` (or `pipeline`), which
reconnects with backoff after a dropped connection and runs the operation again when that is
safe: always when the failure came before COMMIT was sent (nothing was written), and after an
unanswered COMMIT only for idempotent operations (settlement by lease token, enqueue by id,
renewals)."""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors

from ...errors import StoreError, StoreUnavailable
from ..deadlines import CONNECT, retry_window
from . import packed
from .config import Settings

T = TypeVar("T")
# Connections inherited from a parent process: kept referenced, never used nor closed, so that
# the parent's session is not ended by a child's garbage collection (no connection crosses fork).
_INHERITED: list[Any] = []
_WEAK = ("off", "local", "remote_write")
_GONE = (pgerrors.AdminShutdown, pgerrors.CannotConnectNow, pgerrors.CrashShutdown)


class _Bounded(psycopg.Connection):
    """A connection whose every wait for the server ends after `round_trip` seconds (unless
    the caller gives its own timeout, as LISTEN's notifies() does): a stalled network fails the
    call instead of hanging it. A wait that timed out leaves the connection in an unknown state,
    so it is closed and the caller sees it as dropped."""

    round_trip: float = 15.0
    packs: bool = False  # whether it sends packed arrays (packed.py: UTF-8 client encoding)

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        try:
            return super().wait(gen, interval, self.round_trip if timeout is None else timeout)
        except pgerrors._WaitTimeout:
            if timeout is not None:
                raise  # the caller's own deadline (notifies): the connection is fine
            self.pgconn.finish()
            silence = f"no answer from the server within {self.round_trip:g} s"
            raise psycopg.OperationalError(silence) from None


class _SecondaryErrors(logging.Filter):
    """psycopg logs ("error ignored terminating <Pipeline [BAD]>: the connection is lost") the
    second error of a pipeline that failed, behind the caller's back, while the first one is
    raised to us and becomes the caller's exception. Only those records are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("error ignored terminating", "error ignored exiting"))


logging.getLogger("psycopg").addFilter(_SecondaryErrors())


class Connections:
    """Per-thread connections to one database, with the session's synchronous_commit level
    checked once per connection and raised to `on` per write transaction when weaker."""

    def __init__(self, settings: Settings, retry_for: float = 10.0) -> None:
        self.settings = settings
        self.retry_for = retry_for
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[tuple[psycopg.Connection, int]] = []
        self.closed = False

    def connect(self, autocommit: bool = False) -> psycopg.Connection:
        """A new connection; StoreUnavailable (URL masked) when the server cannot be reached."""
        # A caller that asked the store to give up soon (a worker's loop) is not held for the
        # whole connect_timeout, once per address psycopg tries, by a server that does not answer.
        patience = retry_window(float("inf"))
        # None leaves the URL's own connect_timeout (psycopg drops parameters given as None).
        timeout = max(2, math.ceil(patience)) if patience < CONNECT else None
        try:
            conn = _Bounded.connect(self.settings.conninfo, autocommit=autocommit, connect_timeout=timeout)
        except psycopg.Error as err:
            raise StoreUnavailable(
                f"PostgreSQL at {self.settings.masked} is unreachable: {one_line(err)}"
            ) from None
        conn.round_trip = self.settings.round_trip
        conn.packs = packed.register(conn)
        return conn

    def get(self) -> tuple[psycopg.Connection, bool]:
        """This thread's connection and whether its writes must raise synchronous_commit."""
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is not None and local.pid != os.getpid():
            _INHERITED.append(conn)
            conn = local.conn = None
        if conn is not None and (conn.closed or conn.broken):
            self.discard(conn)
            conn = None
        if conn is None:
            if self.closed:
                raise StoreError("the PostgreSQL store is closed")
            # Autocommit: every transaction sends its own BEGIN (run, pipeline), so that a
            # pipeline can carry BEGIN and COMMIT with its statements, without a Sync each.
            conn = self.connect(autocommit=True)
            with conn.cursor() as cur:
                cur.execute("SHOW synchronous_commit")
                row = cur.fetchone()
            local.conn, local.pid = conn, os.getpid()
            local.weak = row is not None and row[0] in _WEAK
            with self._lock:
                self._open.append((conn, os.getpid()))
        return conn, local.weak

    def discard(self, conn: psycopg.Connection) -> None:
        """Forget a connection (closing it quietly when it belongs to this process)."""
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with self._lock:
            owners = [pid for c, pid in self._open if c is conn]
            self._open = [(c, pid) for c, pid in self._open if c is not conn]
        _close(conn, owners[0] if owners else os.getpid())

    def run(
        self,
        op: Callable[[psycopg.Cursor, bool], T],
        *,
        write: bool = True,
        idempotent: bool = False,
        raise_sync: str = "",
    ) -> T:
        """Run `op(cursor, retrying)` as one transaction and commit it.

        `retrying` is True when an earlier try may have committed (its COMMIT went unanswered),
        so that the operation can recognise its own earlier effect."""

        def attempt(conn: psycopg.Connection, weak: bool, retrying: bool, sent: list[bool]) -> T:
            with conn.cursor() as cur:
                cur.execute(b"BEGIN")
                if write and weak:
                    cur.execute(raise_sync)
                result = op(cur, retrying)
                sent[0] = True
                conn.commit()
            return result

        return self._retrying(attempt, idempotent)

    def alone(
        self, statement: str, params: dict[str, Any], packing: dict[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement as its own implicit transaction (no BEGIN: autocommit commits it
        with the reply, one message and one answer) and return its rows. For a statement that
        writes, it must raise synchronous_commit itself where the session's is weaker (m007's
        claim_free does). Not sent again once sent: the outcome of a dropped reply is unknown.
        `packing`: the element types of its array parameters, packed by packed.py on a
        connection that can send them (else psycopg dumps them)."""

        def attempt(conn: psycopg.Connection, weak: bool, retrying: bool, sent: list[bool]) -> list:
            values = params
            if packing is not None and getattr(conn, "packs", False):
                values = packed.pack(params, packing)
            sent[0] = True
            with conn.cursor() as cur:
                cur.execute(statement, values)
                return cur.fetchall()

        return self._retrying(attempt, idempotent=False)

    def pipeline(
        self,
        send: Callable[[psycopg.Connection, bool], Callable[[], T]],
        *,
        idempotent: bool,
        raise_sync: str,
        after: tuple[str, dict[str, Any]] | None = None,
    ) -> T:
        """Run one write transaction in pipeline mode, so that it leaves in as few round trips
        as its reads allow (one when it reads nothing before its end): BEGIN, `raise_sync` when
        the session's synchronous_commit is weaker than `on`, the statements that
        `send(conn, retrying)` queues, COMMIT; then `after` (a statement and its parameters),
        which runs in an implicit transaction of its own that the pipeline's final Sync
        commits. `send` returns a function that reads the results once they arrived.

        The COMMIT leaves with the statements, so after a dropped connection the outcome is
        unknown: the transaction is sent again only when `idempotent`, with `retrying` True."""

        def attempt(conn: psycopg.Connection, weak: bool, retrying: bool, sent: list[bool]) -> T:
            sent[0] = True
            try:
                with conn.pipeline(), conn.cursor() as ours:
                    ours.execute(b"BEGIN")
                    if weak:
                        ours.execute(raise_sync)
                    read = send(conn, retrying)
                    ours.execute(b"COMMIT")
                    if after is not None:
                        ours.execute(*after)
                return read()
            finally:
                self._end_failed(conn)

        return self._retrying(attempt, idempotent)

    def exchange(self, send: Callable[[psycopg.Connection, bool], T], *, idempotent: bool) -> T:
        """Run `send(conn, weak)`, which writes through libpq itself (oneflush.py) a transaction
        with its COMMIT, with `pipeline`'s rules: sent again after a dropped connection only when
        `idempotent`, and a transaction an error left open rolled back."""

        def attempt(conn: psycopg.Connection, weak: bool, retrying: bool, sent: list[bool]) -> T:
            sent[0] = True
            try:
                return send(conn, weak)
            finally:
                self._end_failed(conn)

        return self._retrying(attempt, idempotent)

    def _retrying(
        self, attempt: Callable[[psycopg.Connection, bool, bool, list[bool]], T], idempotent: bool
    ) -> T:
        """Call `attempt(conn, weak, retrying, sent)` until it returns, reconnecting with
        backoff after a dropped connection. `attempt` sets sent[0] once a COMMIT may have
        reached the server; from then on only an idempotent operation is tried again."""
        deadline = time.monotonic() + retry_window(self.retry_for)
        delay, retrying = 0.05, False
        while True:
            sent = [False]
            try:
                conn, weak = self.get()
                return attempt(conn, weak, retrying, sent)
            except psycopg.OperationalError as err:
                if not self._dropped(err):
                    self._rollback()
                    raise
                self._forget_current()
                if sent[0] and not idempotent:
                    raise StoreUnavailable(
                        f"PostgreSQL at {self.settings.masked}: connection lost while "
                        f"committing; the outcome is unknown: {err}"
                    ) from None
                retrying = retrying or sent[0]
                if time.monotonic() + delay > deadline:
                    raise StoreUnavailable(
                        f"PostgreSQL at {self.settings.masked} is unreachable: {one_line(err)}"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except StoreUnavailable:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except BaseException:
                self._rollback()
                raise

    def _end_failed(self, conn: psycopg.Connection) -> None:
        """Roll back a transaction that an error in a pipeline left open (the server skips the
        rest of a pipeline after an error, COMMIT included). A connection that cannot be
        brought back to idle is discarded."""
        if conn.closed or conn.broken:
            return
        try:
            # libpq's status as it is (conn.info builds an object and an enum at each call)
            if conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.rollback()
        except psycopg.Error:
            self.discard(conn)

    def _dropped(self, err: BaseException) -> bool:
        conn = getattr(self._local, "conn", None)
        return isinstance(err, _GONE) or conn is None or conn.closed or conn.broken

    def _forget_current(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self.discard(conn)

    def _rollback(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            return
        try:
            conn.rollback()
        except psycopg.Error:
            self.discard(conn)

    def close(self) -> None:
        """Close every connection this process opened; the store is unusable afterwards."""
        self.closed = True
        with self._lock:
            conns, self._open = self._open, []
        for conn, pid in conns:
            _close(conn, pid)


def _close(conn: psycopg.Connection, owner: int) -> None:
    """Close a connection this process opened; keep one inherited across fork untouched."""
    if owner != os.getpid():
        _INHERITED.append(conn)
        return
    try:
        conn.close()
    except Exception:  # it is closed anyway: a broken connection may fail to close
        pass


def one_line(err: BaseException) -> str:
    """libpq's message on one line, every line kept: the reason ("port 5433 failed: Connection
    refused") comes first and the hint ("Is the server running...") after it."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return "; ".join(lines) or type(err).__name__
