"""Opening a store by URL. Concrete stores are imported only when their scheme is used, so
`import tinyjobs` needs neither psycopg nor redis."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ..urls import store_kind
from .base import Claimed, NewJob, QueuePolicy, Settlement, Store

__all__ = ["Claimed", "NewJob", "QueuePolicy", "Settlement", "Store", "open_store"]

_MODULES = {
    "memory": "tinyjobs.stores.memory",
    "sqlite": "tinyjobs.stores.sqlite",
    "postgres": "tinyjobs.stores.postgres",
    "redis": "tinyjobs.stores.redis",
}


def open_store(url: str, **options: Any) -> Store:
    """The store a URL names, opened (and its schema migrated). ConfigError for a bad URL,
    StoreUnavailable when it cannot be reached; both messages mask the password."""
    module = import_module(_MODULES[store_kind(url)])
    return module.open(url, **options)
