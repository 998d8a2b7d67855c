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


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest):
    """Each store in turn, fresh and empty for the test."""
    marker = request.node.get_closest_marker("requires")
    instance = request.getfixturevalue(f"{request.param}_store")
    if marker is not None:
        missing = [cap for cap in marker.args if cap not in instance.capabilities]
        if missing:
            pytest.skip(f"{request.param} store lacks capability {', '.join(missing)}")
    return instance
