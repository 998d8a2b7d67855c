"""Running the store contract suite through a store's async twin (tinyjobs.stores.aio).

`AsyncBridge(store)` is the store, except that its front door (enqueue, get, cancel, retry)
awaits the async twin's coroutines on an event loop of the test's thread. Tests marked
`sync_and_async` run once on the store and once on its bridge (tests/conftest.py), so the
async path meets the very same assertions. A caller's connection for JOB-02 on PostgreSQL is
then a psycopg.AsyncConnection on that loop, behind `AsyncCaller`'s sync commit/rollback."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from tinyjobs.job import Job
from tinyjobs.stores.aio import async_store
from tinyjobs.stores.base import NewJob, Store


class AsyncBridge:
    def __init__(self, store: Store) -> None:
        self.sync = store
        self.runner = asyncio.Runner()
        self.astore = async_store(store)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sync, name)

    def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        conn = conn.aconn if isinstance(conn, AsyncCaller) else conn
        return self.runner.run(self.astore.enqueue(jobs, now, conn=conn))

    def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        return self.runner.run(self.astore.get(job_id, now, executions=executions))

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        return self.runner.run(self.astore.cancel(job_id, now))

    def retry(self, job_id: str, now: float | None = None) -> bool:
        return self.runner.run(self.astore.retry(job_id, now))

    def aio(self) -> Any:
        return self.astore

    def close_bridge(self) -> None:
        self.runner.run(self.astore.aclose())
        self.runner.close()


class AsyncCaller:
    """The application's own psycopg.AsyncConnection, driven from a sync test."""

    def __init__(self, bridge: AsyncBridge, conninfo: str) -> None:
        import psycopg

        self.run = bridge.runner.run
        self.aconn = self.run(psycopg.AsyncConnection.connect(conninfo))

    def commit(self) -> None:
        self.run(self.aconn.commit())

    def rollback(self) -> None:
        self.run(self.aconn.rollback())

    def close(self) -> None:
        self.run(self.aconn.close())
