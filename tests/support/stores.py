"""One fixture per store, each giving a fresh, empty store for one test. The `store` fixture in
tests/conftest.py picks among them."""

from __future__ import annotations

import pytest


@pytest.fixture
def memory_store():
    from tinyjobs.stores.memory import open as open_memory

    store = open_memory("memory://")
    yield store
    store.close()


@pytest.fixture
def sqlite_store(tmp_path):
    from tinyjobs.stores.sqlite import open as open_sqlite

    store = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    yield store
    store.close()


# postgres_store and redis_store are added by their stores' work (issues 5 and 6), each giving a
# fresh namespace (a schema, a key prefix) per test and dropping it afterwards.
