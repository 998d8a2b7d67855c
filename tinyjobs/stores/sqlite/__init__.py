"""The SQLite store, the embedded default: `sqlite:///rel.db` or `sqlite:////abs.db`, with
`?synchronous=normal` to trade power-loss durability for speed (DUR-01)."""

from __future__ import annotations

from typing import Any

from .connection import check_version, check_writable, migrate, parse_url
from .store import SQLiteStore

__all__ = ["SQLiteStore", "open"]


def open(url: str, **options: Any) -> SQLiteStore:
    """Open (creating if needed) the file a sqlite URL names and migrate its schema.

    ConfigError for a URL that names no usable file or an unknown option; StoreUnavailable
    when the file or its directory cannot be written or SQLite is too old."""
    check_version()
    target = parse_url(url, **options)
    check_writable(target)
    store = SQLiteStore(target)
    try:
        migrate(store._pool.get(), url)
    except BaseException:
        store.close()
        raise
    return store
