"""Fixtures shared by every test tier. The contract suite knows one fixture, `store`, which is
parametrised over every store that exists; each store's own fixture lives in tests/support/."""

from __future__ import annotations

import importlib.util

import pytest
from support.postgres_fixtures import *  # noqa: F403  (postgres_store)
from support.redis_fixtures import *  # noqa: F403  (redis_store)
from support.services import *  # noqa: F403  (postgres_url, redis_url, ...)
from support.stores import *  # noqa: F403  (memory_store, sqlite_store, postgres_store, redis_store)

STORES = [
    name
    for name in ("memory", "sqlite", "postgres", "redis")
    if importlib.util.find_spec(f"tinyjobs.stores.{name}") is not None
    and hasattr(importlib.import_module(f"tinyjobs.stores.{name}"), "open")
]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that uses `store` runs on each store; one marked `sync_and_async` also on each
    store's async twin (`NAME-async`)."""
    if "store" not in metafunc.fixturenames:
        return
    params = list(STORES)
    if metafunc.definition.get_closest_marker("sync_and_async"):
        params = [p for name in STORES for p in (name, f"{name}-async")]
    metafunc.parametrize("store", params, indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest):
    """Each store in turn, fresh and empty for the test; `NAME-async` is the store seen
    through its async twin (support/aio_bridge.py)."""
    marker = request.node.get_closest_marker("requires")
    name, _, api = request.param.partition("-")
    instance = request.getfixturevalue(f"{name}_store")
    if api == "async":
        from support.aio_bridge import AsyncBridge

        instance = AsyncBridge(instance)
        request.addfinalizer(instance.close_bridge)
    if marker is not None:
        missing = [cap for cap in marker.args if cap not in instance.capabilities]
        if missing:
            pytest.skip(f"{name} store lacks capability {', '.join(missing)}")
    return instance
