"""A caller's own database connection to a store's database, for JOB-02 tests."""

from __future__ import annotations

import sqlite3
from typing import Any


def caller_connection(store: Any) -> Any:
    """A connection of the application's own (not tinyjobs'), on the store's database."""
    url: str = store.url
    if url.startswith("sqlite:"):
        path = url.split("://", 1)[1][1:].split("?", 1)[0]
        return sqlite3.connect(path, isolation_level="DEFERRED")
    if url.startswith(("postgres:", "postgresql:")):
        import psycopg
        from support.aio_bridge import AsyncBridge, AsyncCaller

        if isinstance(store, AsyncBridge):  # the async path: an AsyncConnection on its loop
            return AsyncCaller(store, store.settings.url.split("?", 1)[0])

        # store.url is masked for printing; the store's settings keep the real one.
        return psycopg.connect(store.settings.url.split("?", 1)[0])
    raise AssertionError(f"no caller connection for {url}")
