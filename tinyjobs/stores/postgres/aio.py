"""The PostgreSQL store for asyncio: the front door's calls (enqueue, get, cancel, retry) on
psycopg's AsyncConnection, so that the event loop never waits on a round trip.

Same statements, same rows, same decoding as the sync store: the operations are the steps of
steps.py and enqueue.py, driven on an async cursor. Same guarantees: each call is one
transaction committed with synchronous_commit at least `on` before it returns (acknowledged =
durable); a dropped connection is retried with backoff when that is safe (before COMMIT was
sent, or for an operation that is idempotent: enqueue by id, retry); errors and messages are
the sync store's, URL masked.

Connections: a small pool per event loop (an AsyncConnection belongs to the loop that opened
it), opened lazily, in autocommit mode like the sync store's (each transaction sends its own
BEGIN, so that a pipeline carries BEGIN and COMMIT with its statements). `size` bounds the
connections of one loop; callers beyond it wait their turn without blocking the loop."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors

from ...errors import NotSupported, StoreError, StoreUnavailable
from ...job import Job
from ..aio import Later, LoopLocal, built
from ..base import NewJob
from ..deadlines import CONNECT, retry_window
from . import packed, steps
from .config import Settings
from .enqueue import (
    added_one,
    caller_steps,
    enqueue_later_steps,
    enqueue_steps,
    existing_steps,
    held,
    holding,
    one_params,
    wake,
)
from .steps import adrive

T = TypeVar("T")
Attempt = Callable[[psycopg.AsyncConnection, bool, bool, list[bool]], Awaitable[T]]
DEFAULT_SIZE = 10
_WEAK = ("off", "local", "remote_write")
_GONE = (pgerrors.AdminShutdown, pgerrors.CannotConnectNow, pgerrors.CrashShutdown)
_IDLE = psycopg.pq.TransactionStatus.IDLE


class _BoundedAsync(psycopg.AsyncConnection):
    """As connection._Bounded, for asyncio: every wait for the server ends after `round_trip`
    seconds (unless the caller gives its own timeout), so a stalled network fails the call
    instead of leaving the awaiting task suspended for ever. A wait that timed out leaves the
    connection in an unknown state: it is closed, and the caller sees it as dropped (tried
    again on a fresh connection while that is safe, as after any dropped connection)."""

    round_trip: float = 15.0
    packs: bool = False  # whether it sends packed arrays (packed.py)

    async def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        try:
            return await super().wait(gen, interval, self.round_trip if timeout is None else timeout)
        except pgerrors._WaitTimeout:
            if timeout is not None:
                raise  # the caller's own deadline: the connection is fine
            self.pgconn.finish()
            silence = f"no answer from the server within {self.round_trip:g} s"
            raise psycopg.OperationalError(silence) from None


class _Pool:
    """The connections of one event loop: at most `size` at once, idle ones reused."""

    def __init__(self, settings: Settings, size: int) -> None:
        self.settings = settings
        self.slots = asyncio.Semaphore(size)
        self.idle: list[tuple[psycopg.AsyncConnection, bool]] = []
        self.all: set[psycopg.AsyncConnection] = set()

    async def connect(self) -> tuple[psycopg.AsyncConnection, bool]:
        """A new connection and whether its writes must raise synchronous_commit."""
        # As the sync store: a caller that asked to give up soon (retrying_at_most) is not held
        # for the whole connect_timeout by a server that does not answer.
        patience = retry_window(float("inf"))
        timeout = max(2, math.ceil(patience)) if patience < CONNECT else None
        try:
            conn = await _BoundedAsync.connect(
                self.settings.conninfo, autocommit=True, connect_timeout=timeout
            )
        except psycopg.Error as err:
            reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            raise StoreUnavailable(f"PostgreSQL at {self.settings.masked} is unreachable: {reason}") from None
        conn.round_trip = self.settings.round_trip
        conn.packs = packed.register(conn)
        self.all.add(conn)
        try:
            cur = await conn.execute("SHOW synchronous_commit")
            row = await cur.fetchone()
        except psycopg.Error as err:
            await self.discard(conn)
            raise StoreUnavailable(f"PostgreSQL at {self.settings.masked} is unreachable: {err}") from None
        return conn, row is not None and row[0] in _WEAK

    async def discard(self, conn: psycopg.AsyncConnection) -> None:
        self.all.discard(conn)
        try:
            await conn.close()
        except Exception:
            pass

    async def close(self) -> None:
        conns, self.all, self.idle = list(self.all), set(), []
        for conn in conns:
            await self.discard(conn)

    def abandon(self) -> None:
        """Close the sockets of a pool whose loop is gone (libpq's finish needs no loop)."""
        conns, self.all, self.idle = list(self.all), set(), []
        for conn in conns:
            conn.pgconn.finish()


class AsyncPostgresStore:
    """enqueue, get, cancel and retry of a PostgresStore's schema, as coroutines."""

    capabilities = frozenset({"transactions", "notify", "shared"})

    def __init__(
        self, settings: Settings, q: dict[str, str], retry_for: float = 10.0, size: int = 10
    ) -> None:
        self.settings = settings
        self.url = settings.masked
        self.q = q
        self.retry_for = retry_for
        self.size = size
        self._channel = settings.channel
        self._pools = LoopLocal(lambda: _Pool(settings, size), _Pool.close, _Pool.abandon)
        self.closed = False

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[tuple[psycopg.AsyncConnection, bool]]:
        """A connection of this loop's pool, back to the pool when it is idle and healthy
        afterwards, else closed (an error or a cancellation may leave it mid-transaction)."""
        if self.closed:
            raise StoreError("the PostgreSQL store is closed")
        pool = await self._pools.get()
        async with pool.slots:
            conn, weak = pool.idle.pop() if pool.idle else await pool.connect()
            healthy = False
            try:
                yield conn, weak
                healthy = True
            finally:
                if healthy and not conn.broken and conn.info.transaction_status == _IDLE:
                    pool.idle.append((conn, weak))
                else:
                    await _shield(pool.discard(conn))

    async def _retrying(
        self,
        attempt: Callable[[psycopg.AsyncConnection, bool, bool, list[bool]], Awaitable[T]],
        idempotent: bool,
    ) -> T:
        """`attempt(conn, weak, retrying, sent)` until it returns, as the sync store's
        Connections._retrying: reconnect with backoff after a dropped connection; once a COMMIT
        may have reached the server (sent[0]) only an idempotent operation is tried again."""
        deadline = time.monotonic() + retry_window(self.retry_for)
        delay, retrying = 0.05, False
        while True:
            sent = [False]
            try:
                async with self._connection() as (conn, weak):
                    try:
                        return await attempt(conn, weak, retrying, sent)
                    except psycopg.OperationalError as err:
                        if not (isinstance(err, _GONE) or conn.closed or conn.broken):
                            raise
                        raise _Dropped(err) from None
            except _Dropped as dropped:
                if sent[0] and not idempotent:
                    raise StoreUnavailable(
                        f"PostgreSQL at {self.url}: connection lost while committing; "
                        f"the outcome is unknown: {dropped.err}"
                    ) from None
                retrying = retrying or sent[0]
                if time.monotonic() + delay > deadline:
                    raise StoreUnavailable(
                        f"PostgreSQL at {self.url} is unreachable: {dropped.err}"
                    ) from None
            except StoreUnavailable:
                if time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _run(
        self,
        op: Callable[[psycopg.AsyncCursor, bool], Awaitable[T]],
        *,
        write: bool = True,
        idempotent: bool = True,
    ) -> T:
        """`op(cursor, retrying)` as one transaction, committed."""

        async def attempt(conn: psycopg.AsyncConnection, weak: bool, retrying: bool, sent: list[bool]) -> T:
            async with conn.cursor() as cur:
                try:
                    await cur.execute(b"BEGIN")
                    if write and weak:
                        await cur.execute(self.q["raise_sync_commit"])
                    result = await op(cur, retrying)
                    sent[0] = True
                    await conn.commit()
                except Exception:
                    await _end_failed(conn)
                    raise
            return result

        return await self._retrying(attempt, idempotent)

    async def _steps(
        self,
        make: Callable[[], steps.Steps[T]],
        *,
        write: bool,
        idempotent: bool,
        prepare: Callable[[Any, steps.Statement], Awaitable[steps.Statement]] | None = None,
    ) -> T:
        async def op(cur: psycopg.AsyncCursor, retrying: bool) -> T:
            return await adrive(cur, make(), prepare)

        return await self._run(op, write=write, idempotent=idempotent)

    # -- the front door -------------------------------------------------------------------

    async def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        """As PostgresStore.enqueue: one transaction, ours, or the caller's with `conn` (a
        psycopg.AsyncConnection: JOB-02)."""
        if not jobs:
            return []
        if conn is not None:
            return await self._enqueue_on(conn, jobs, now)
        return [make() for make in await self.enqueue_later(jobs, now)]

    async def enqueue_later(self, jobs: Sequence[NewJob], now: float | None = None) -> list[Later]:
        """`enqueue` (ours, not the caller's transaction) returning once the batch committed,
        with each job's snapshot left to decode (stores/aio.py DecodesLater): Grouped decodes
        them a few per turn of the loop as it resumes their callers."""
        if not jobs:
            return []
        if len(jobs) == 1 and not jobs[0].after:
            return [built(await _past_key_races(lambda: self._enqueue_one(jobs[0], now)))]

        def make() -> steps.Steps[tuple[list[Later], set[str]]]:
            return enqueue_later_steps(self.q, jobs, now, None)

        def write() -> Awaitable[tuple[list[Later], set[str]]]:
            return self._steps(make, write=True, idempotent=True, prepare=self._packing)

        later, queues = await _past_key_races(write)
        await self._notify(queues)
        return later

    async def _packing(self, cur: Any, statement: steps.Statement) -> steps.Statement:
        """The batch's `enqueue` with its arrays packed (packed.py), on a connection that
        takes them, and sent in the next turn of the loop; every other statement as it is."""
        sql, params = statement
        if sql is self.q["enqueue"] and getattr(cur.connection, "packs", False):
            params = packed.pack(params)
            await asyncio.sleep(0)
        return sql, params

    async def _enqueue_one(self, job: NewJob, now: float | None) -> Job:
        """One job without parents: BEGIN, the insert, COMMIT and the wake-up of its queue's
        waiters leave in one round trip (pipeline mode), as in the sync store."""

        async def attempt(
            conn: psycopg.AsyncConnection, weak: bool, retrying: bool, sent: list[bool]
        ) -> list:
            sent[0] = True
            try:
                async with conn.pipeline(), conn.cursor() as ours:
                    await ours.execute(b"BEGIN")
                    if weak:
                        await ours.execute(self.q["raise_sync_commit"])
                    cur = conn.cursor()
                    await cur.execute(self.q["enqueue_one"], one_params(job, now))
                    await ours.execute(b"COMMIT")
                    await ours.execute(*wake(self.q, self._channel, {job.queue}))
                return await cur.fetchall()
            except Exception:
                await _end_failed(conn)
                raise

        rows = await self._retrying(attempt, idempotent=True)
        added = added_one(rows)
        if added is not None:
            return added
        found = await self._steps(lambda: existing_steps(self.q, [job], now), write=False, idempotent=True)
        if held(job, found):
            return holding(job, found)
        # An id whose final job may be replaced (JOB-09): enqueue_one leaves it, the batch way
        # replaces it and forgets its past.
        [replaced] = await _past_key_races(
            lambda: self._steps(lambda: enqueue_steps(self.q, [job], now, None), write=True, idempotent=True)
        )
        if replaced.created:  # the wake-up above went before it existed
            await self._notify({job.queue})
        return replaced

    async def _enqueue_on(self, conn: Any, jobs: Sequence[NewJob], now: float | None) -> list[Job]:
        """Through the caller's AsyncConnection, inside its open transaction: the jobs exist
        exactly when the caller commits (JOB-02). Not retried: the transaction is the caller's."""
        if not isinstance(conn, psycopg.AsyncConnection):
            raise NotSupported(
                "aenqueue(conn=...) takes a psycopg.AsyncConnection in an open transaction, not "
                f"{type(conn).__name__}; a sync psycopg.Connection goes to enqueue(conn=...)"
            )
        if conn.autocommit and conn.info.transaction_status == _IDLE:
            async with conn.transaction(), conn.cursor() as cur:
                return await adrive(cur, caller_steps(self.q, jobs, now, self._channel))
        async with conn.cursor() as cur:
            return await adrive(cur, caller_steps(self.q, jobs, now, self._channel))

    async def _notify(self, queues: set[str]) -> None:
        """Wake the waiters of these queues after commit; best effort, as in the sync store."""
        if not queues:
            return
        sql, params = wake(self.q, self._channel, queues)

        async def attempt(conn: psycopg.AsyncConnection, weak: bool, again: bool, sent: list[bool]) -> None:
            # One statement, its own implicit transaction (the connection is in autocommit
            # mode): one round trip, where BEGIN and COMMIT around it made three.
            await conn.execute(sql, params)

        try:
            await self._retrying(attempt, idempotent=True)
        except (psycopg.Error, StoreError):
            pass

    async def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        """As PostgresStore.get."""
        return await self._steps(
            lambda: steps.get(self.q, job_id, now, executions), write=False, idempotent=True
        )

    async def cancel(self, job_id: str, now: float | None = None) -> bool:
        """As PostgresStore.cancel (JOB-08); not repeated once its COMMIT was sent."""
        return await self._steps(
            lambda: steps.cancel(self.q, job_id, now, self._channel), write=True, idempotent=False
        )

    async def retry(self, job_id: str, now: float | None = None) -> bool:
        """As PostgresStore.retry."""
        params = {"now": now, "id": job_id, "channel": self._channel}

        async def op(cur: psycopg.AsyncCursor, retrying: bool) -> bool:
            await cur.execute(self.q["retry"], params)
            return bool(await cur.fetchall())

        try:
            return await self._run(op)
        except pgerrors.UniqueViolation:  # its key is held by a live job meanwhile
            return False

    async def aclose(self) -> None:
        """Close this loop's connections; the store is unusable afterwards. The pools of
        other loops close when their loops shut down."""
        self.closed = True
        await self._pools.close()


class _Dropped(Exception):
    def __init__(self, err: BaseException) -> None:
        self.err = err


async def _end_failed(conn: psycopg.AsyncConnection) -> None:
    """Roll back a transaction an error left open; a connection that cannot be brought back
    to idle is closed (the pool then drops it)."""
    if conn.closed or conn.broken:
        return
    try:
        if conn.info.transaction_status != _IDLE:
            await conn.rollback()
    except psycopg.Error:
        await _shield(conn.close())


async def _shield(closing: Awaitable[None]) -> None:
    try:
        await closing
    except Exception:
        pass


async def _past_key_races(write: Callable[[], Awaitable[T]]) -> T:
    """As store._past_key_races: tried again when a concurrent enqueue took the same key
    between our check and our insert; after six tries the error stands."""
    for _ in range(5):
        try:
            return await write()
        except pgerrors.UniqueViolation:
            continue
    return await write()
