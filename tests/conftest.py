"""Fixtures shared by every test tier. The contract suite knows one fixture, `store`, which is
parametrised over every store in support.stores.STORES; each store's own fixture lives in
tests/support/."""

from __future__ import annotations

import pytest
from support.postgres_fixtures import *  # noqa: F403  (postgres_store)
from support.redis_fixtures import *  # noqa: F403  (redis_store)
from support.services import *  # noqa: F403  (postgres_url, redis_url, ...)
from support.stores import *  # noqa: F403  (memory_store, sqlite_store)
from support.stores import CAPABILITIES, STORES


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
    """Each store in turn, fresh and empty for the test; `NAME-async` is the store seen through
    its async twin (support/aio_bridge.py). A test marked `requires(cap)` skips on a store only
    where STORES states that the store lacks `cap`."""
    name, _, api = request.param.partition("-")
    instance = request.getfixturevalue(f"{name}_store")
    if api == "async":
        from support.aio_bridge import AsyncBridge

        instance = AsyncBridge(instance)
        request.addfinalizer(instance.close_bridge)
    marker = request.node.get_closest_marker("requires")
    if marker is not None:
        lost = [cap for cap in marker.args if cap in STORES[name] - instance.capabilities]
        if lost:
            pytest.fail(f"{name} store no longer declares {', '.join(lost)}", pytrace=False)
        gap = [cap for cap in marker.args if cap not in STORES[name]]
        if gap:
            pytest.skip(f"{name} store lacks capability {', '.join(gap)}")
    return instance


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A `requires` marker that names no capability, an unknown one, or sits on a test that does
    not use `store` would skip (or be ignored) silently: refuse it at collection."""
    for item in items:
        marker = item.get_closest_marker("requires")
        if marker is None:
            continue
        unknown = sorted(set(marker.args) - CAPABILITIES)
        if not marker.args or unknown:
            raise pytest.UsageError(
                f"{item.nodeid}: requires() takes capabilities among {sorted(CAPABILITIES)}, "
                f"got {list(marker.args)}"
            )
        if "store" not in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid}: requires() applies only to tests of the `store` fixture")
