"""redis_store: a fresh key prefix per test, its keys deleted afterwards."""

from __future__ import annotations

import secrets

import pytest

from tinyjobs.urls import with_query

__all__ = ["redis_store"]


@pytest.fixture
def redis_store(redis_url: str):
    from tinyjobs.stores.redis import open as open_redis

    store = open_redis(with_query(redis_url, prefix=f"test-{secrets.token_hex(6)}"))
    yield store
    store.drop()
    store.close()
