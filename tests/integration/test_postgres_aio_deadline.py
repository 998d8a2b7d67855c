"""The asyncio PostgreSQL store under a network that stalls (issue 17, item 5; docs/stores.md,
"Timeouts"): packets just stop, nobody resets the connection. Each round trip of an
AsyncConnection has the sync store's deadline (`?timeout=`), so `aenqueue` fails with
StoreUnavailable instead of leaving the awaiting task suspended for ever, and works again once
the network is back."""

from __future__ import annotations

import asyncio
import os
import time
from urllib.parse import urlsplit

import pytest
from support.proxy import FaultyProxy

from tinyjobs.errors import StoreUnavailable
from tinyjobs.stores import open_store
from tinyjobs.stores.base import NewJob
from tinyjobs.stores.deadlines import retrying_at_most

ROUND_TRIP = 1.0


def _job(job_id: str) -> NewJob:
    return NewJob(job_id, "noop")


@pytest.mark.slow
def test_a_stalled_connection_fails_aenqueue_at_its_deadline_and_work_resumes(postgres_url):
    server = urlsplit(postgres_url)
    schema = f"aio_stall_{os.urandom(4).hex()}"
    direct = f"{postgres_url}?schema={schema}"
    with FaultyProxy((server.hostname, server.port)) as proxy:
        proxied = direct.replace(f"{server.hostname}:{server.port}", f"127.0.0.1:{proxy.port}", 1)
        store = open_store(f"{proxied}&timeout={ROUND_TRIP:g}s")
        astore = store.aio()

        async def scenario() -> tuple[BaseException | None, float, str]:
            await astore.enqueue([_job("before")])  # a pooled connection, open and idle
            proxy.stall()
            started = time.monotonic()
            failed: BaseException | None = None
            try:
                with retrying_at_most(0.5):  # one reconnect at most, as a worker's loop asks
                    # The outer bound only keeps a regression from hanging the suite.
                    await asyncio.wait_for(astore.enqueue([_job("stalled")]), 60)
            except (StoreUnavailable, TimeoutError) as err:
                failed = err
            took = time.monotonic() - started
            proxy.resume()
            added = await astore.enqueue([_job("after")])
            await astore.aclose()
            return failed, took, added[0].id

        try:
            failed, took, after = asyncio.run(scenario())
        finally:
            store.close()
            cleanup = open_store(direct)
            cleanup._run(lambda cur, retrying: cur.execute(f"DROP SCHEMA {cleanup.schema} CASCADE"))
            cleanup.close()
    assert isinstance(failed, StoreUnavailable), repr(failed)
    # One round trip on the pooled connection, then one connect bounded by the patience (libpq's
    # connect_timeout has a 2 s floor): far from the 60 s of a call left hanging.
    assert took < ROUND_TRIP + 2 + 3, took
    assert after == "after"
