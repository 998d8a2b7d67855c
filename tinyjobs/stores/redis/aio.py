"""The Redis store for asyncio: the front door's calls (enqueue, get, cancel, retry) on
redis.asyncio, so that the event loop never waits on a round trip.

Same Lua scripts (by SHA, loaded again on NOSCRIPT), same arguments and replies (codec.py),
same retries (a connection error is retried with backoff when the call is safe to repeat or
never reached the server), same errors. `conn=` is refused as in the sync store (JOB-02).

Clients: one per event loop (a redis.asyncio connection belongs to the loop that opened it),
each with a pool of at most `size` connections; callers beyond it wait without blocking."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ...errors import StoreError
from ...job import Job
from ..aio import Later, LoopLocal
from ..base import NewJob
from . import codec
from .connection import RETRY_FOR, _never_sent

if TYPE_CHECKING:
    from .store import RedisStore

T = TypeVar("T")
DEFAULT_SIZE = 10


class AsyncRedisStore:
    """enqueue, get, cancel and retry of a RedisStore's keys, as coroutines."""

    capabilities = frozenset({"notify", "shared"})

    def __init__(self, store: RedisStore, size: int = DEFAULT_SIZE) -> None:
        self.url = store.url
        self._conn = store._conn  # URL, prefix, options and the masked form, parsed once
        self._scripts = store._scripts
        self.size = size
        self._clients = LoopLocal(self._make, _close, _abandon)
        self.closed = False

    def _make(self) -> Any:
        """A client with a pool of at most `size` connections, for one event loop."""
        settings: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": 5.0,
            "socket_timeout": 30.0,
            "health_check_interval": 30,
            "retry": Retry(NoBackoff(), 0),  # we retry ourselves, only where it is safe
            "max_connections": self.size,
            "timeout": None,  # wait for a free connection as long as it takes
        }
        settings.update(self._conn.options)
        pool = aredis.BlockingConnectionPool.from_url(self._conn.client_url, **settings)
        return aredis.Redis(connection_pool=pool)

    async def _call(self, fn: Callable[[Any], Awaitable[T]], safe: bool = True) -> T:
        """As Connection.call: retried with backoff for RETRY_FOR seconds when `safe` or when
        nothing reached the server; StoreUnavailable (URL masked) otherwise."""
        deadline = time.monotonic() + RETRY_FOR
        delay = 0.02
        while True:
            try:
                if self.closed:
                    raise StoreError("the Redis store is closed")
                return await fn(await self._clients.get())
            except (redis.ConnectionError, redis.TimeoutError) as err:
                if not (safe or _never_sent(err)) or time.monotonic() + delay > deadline:
                    raise self._conn.unavailable(err) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _run(self, name: str, args: list[Any]) -> Any:
        return await self._call(lambda client: self._scripts.arun(client, name, args))

    async def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        """As RedisStore.enqueue: one atomic script, safe to repeat (ids dedupe)."""
        args = codec.enqueue_args(jobs, now, conn)
        if not jobs:
            return []
        return codec.enqueue_reply(jobs, await self._run("enqueue", args))

    async def enqueue_later(self, jobs: Sequence[NewJob], now: float | None = None) -> list[Later]:
        """`enqueue` with each job's snapshot left to decode (stores/aio.py DecodesLater):
        Grouped decodes them a few per turn of the loop as it resumes their callers."""
        args = codec.enqueue_args(jobs, now, None)
        if not jobs:
            return []
        return codec.enqueue_later(jobs, await self._run("enqueue", args))

    async def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        """As RedisStore.get: one read-only script."""
        return codec.get_reply(job_id, await self._run("get", codec.get_args(job_id, now, executions)))

    async def cancel(self, job_id: str, now: float | None = None) -> bool:
        """As RedisStore.cancel (JOB-08): one atomic script."""
        return await self._run("cancel", [codec.now_arg(now), job_id]) == 1

    async def retry(self, job_id: str, now: float | None = None) -> bool:
        """As RedisStore.retry: one atomic script."""
        return await self._run("retry", [codec.now_arg(now), job_id]) == 1

    async def aclose(self) -> None:
        """Close this loop's client; the store is unusable afterwards. The clients of other
        loops close when their loops shut down."""
        self.closed = True
        await self._clients.close()


async def _close(client: Any) -> None:
    await client.aclose(close_connection_pool=True)


def _abandon(client: Any) -> None:
    """Drop the connections of a client whose loop is gone: their sockets close with them
    (redis.asyncio needs a running loop to close a connection)."""
    pool = client.connection_pool
    for conn in [*pool._available_connections, *pool._in_use_connections]:
        writer, conn._writer, conn._reader = conn._writer, None, None
        sock = getattr(getattr(writer, "transport", None), "_sock", None)
        if sock is not None:
            sock.close()
