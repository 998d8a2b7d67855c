"""The App's calls for asyncio: `aenqueue`, `aenqueue_many`, `aget`, `acancel`, `aretry`,
`awatch`, `aclose`. Same semantics, errors and guarantees as the sync calls (an enqueue that
returned is durable), and the event loop never waits on the store: PostgreSQL and Redis speak
through their async clients, SQLite and memory through a small pool of threads
(tinyjobs/stores/aio.py says which and why).

The jobs are built exactly as the sync enqueue builds them (`App.new_jobs`): options, names
and JSON arguments are checked on the loop, before anything is sent."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from .watching import Watching

if TYPE_CHECKING:
    from .clock import Clock
    from .job import Job
    from .stores.aio import AsyncStore
    from .stores.base import NewJob, Store

# asyncio and the async stores (tinyjobs/stores/aio.py) are imported by the first coroutine
# that needs them, not here: every `import tinyjobs` (a web app's, the CLI's) went through this
# module, and asyncio alone is 20-40 ms of a process's start. (The supervisor and its workers
# load asyncio anyway, through structlog.) A coroutine of this module runs on a loop, so
# asyncio is loaded by then.

_OPENING = threading.Lock()  # one store per App, whichever thread opens it first


class AsyncCalls:
    """Mixed into App: its front door as coroutines."""

    _astore: AsyncStore | None = None

    if TYPE_CHECKING:

        @property
        def store(self) -> Store: ...

        @property
        def clock(self) -> Clock: ...

        def close(self) -> None: ...

        def new_jobs(
            self, items: Sequence[tuple[str, dict[str, Any]]], options: dict[str, Any]
        ) -> list[NewJob]: ...

    async def astore(self) -> AsyncStore:
        """The store's async twin. The first call opens the store in a thread (connecting and
        migrating are blocking calls) so that even that does not stall the loop."""
        if self._astore is None:
            import asyncio

            from .stores.aio import async_store

            def opened() -> Store:
                with _OPENING:
                    return self.store

            store = await asyncio.to_thread(opened)
            with _OPENING:
                if self._astore is None:
                    self._astore = async_store(store)
        return self._astore

    async def aenqueue(self, task: str, args: dict[str, Any] | None = None, **options: Any) -> Job:
        """`App.enqueue` for asyncio. With `conn=` a psycopg.AsyncConnection (PostgreSQL), the
        job is written in its open transaction and exists exactly when it commits (JOB-02)."""
        return (await self.aenqueue_many([(task, args or {})], **options))[0]

    async def aenqueue_many(self, items: Sequence[tuple[str, dict[str, Any]]], **options: Any) -> list[Job]:
        """`App.enqueue_many` for asyncio: all jobs in one atomic round trip, in order."""
        conn = options.pop("conn", None)
        new_jobs = self.new_jobs(items, options)
        if not new_jobs:
            return []
        store = await self.astore()
        return await store.enqueue(new_jobs, self.clock.store_now(), conn=conn)

    async def aget(self, job_id: str, executions: bool = True) -> Job | None:
        """`App.get` for asyncio: the job's snapshot with its executions, or None."""
        return await (await self.astore()).get(job_id, self.clock.store_now(), executions=executions)

    async def acancel(self, job_id: str) -> bool:
        """`App.cancel` for asyncio (JOB-08): True when there was something to cancel."""
        return await (await self.astore()).cancel(job_id, self.clock.store_now())

    async def aretry(self, job_id: str) -> bool:
        """`App.retry` for asyncio: a failed or cancelled job runs again with fresh attempts."""
        return await (await self.astore()).retry(job_id, self.clock.store_now())

    async def awatch(
        self, job_id: str, interval: float = 0.05, timeout: float | None = None
    ) -> AsyncIterator[Job]:
        """`App.watch` for asyncio: `async for job in app.awatch(id)` yields the job's
        snapshot once per change, ending at a final state (`cancelled` for a waiting job
        cancelled meanwhile); it sleeps between reads without holding the loop."""
        store = await self.astore()
        deadline = None if timeout is None else time.monotonic() + timeout
        watching = Watching()
        while deadline is None or time.monotonic() < deadline:
            seen = watching.see(await store.get(job_id, self.clock.store_now()))
            if seen is not None:
                yield seen
            if watching.done:
                return
            await _sleep(interval)

    async def aclose(self) -> None:
        """Close the async twin's connections of this loop, then the store (in a thread)."""
        astore, self._astore = self._astore, None
        if astore is not None:
            await astore.aclose()
        import asyncio

        await asyncio.to_thread(self.close)


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)
