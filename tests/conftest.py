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


@pytest.fixture(params=list(STORES))
def store(request: pytest.FixtureRequest):
    """Each store in turn, fresh and empty for the test. A test marked `requires(cap)` skips on a
    store only where STORES states that the store lacks `cap`."""
    instance = request.getfixturevalue(f"{request.param}_store")
    marker = request.node.get_closest_marker("requires")
    if marker is not None:
        lost = [cap for cap in marker.args if cap in STORES[request.param] - instance.capabilities]
        if lost:
            pytest.fail(f"{request.param} store no longer declares {', '.join(lost)}", pytrace=False)
        gap = [cap for cap in marker.args if cap not in STORES[request.param]]
        if gap:
            pytest.skip(f"{request.param} store lacks capability {', '.join(gap)}")
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
