"""The Redis store (`redis://`, `rediss://`, `unix://`; option `?prefix=name`, default
`tinyjobs`). See store.py."""

from __future__ import annotations

from typing import Any

from .store import RedisStore

__all__ = ["RedisStore", "open"]


def open(url: str, **options: Any) -> RedisStore:
    """The store a Redis URL names. ConfigError for a bad URL, StoreUnavailable when the server
    cannot be reached; both messages mask the password."""
    return RedisStore(url, **options)
