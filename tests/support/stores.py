"""The stores the contract suite runs on, and one fixture per store, each giving a fresh, empty
store for one test. The `store` fixture in tests/conftest.py picks among them.

STORES is written out, not discovered: a store that fails to import, or loses `open`, fails
every test that asks for it instead of dropping out of the suite."""

from __future__ import annotations

import pytest

__all__ = ["CAPABILITIES", "STORES", "memory_store", "sqlite_store"]

# Every capability a store may declare (tinyjobs/stores/base.py). A `requires` marker naming
# anything else is a typo, which would otherwise skip its test on every store.
CAPABILITIES = frozenset({"transactions", "notify", "shared", "timed", "wakes_one"})

# Each store with the capabilities it declares. A test marked `requires(cap)` skips on a store
# only when this table states the gap; a store that stops declaring a capability it has here
# fails (tests/contract/test_store_capabilities.py) instead of skipping the tests that need it.
STORES: dict[str, frozenset[str]] = {
    "memory": frozenset(),
    "sqlite": frozenset({"transactions", "shared", "timed", "wakes_one"}),
    "postgres": frozenset({"transactions", "notify", "shared", "timed"}),
    "redis": frozenset({"notify", "shared", "timed", "wakes_one"}),
}


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
