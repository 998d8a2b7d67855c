"""The PostgreSQL store: `open("postgresql://user@host/db?schema=tinyjobs")`.

Options in the URL: `schema` (default `tinyjobs`); every other query parameter goes to libpq
(`sslmode`, `target_session_attrs`, `connect_timeout`, ...). Keyword options of `open`:
`migrate` (default True: apply pending migrations under an advisory lock), `retry_for`
(seconds to keep reconnecting after a dropped connection, default 10), `listen` (default True:
LISTEN/NOTIFY wake-ups; False polls, for PgBouncer in transaction mode)."""

from __future__ import annotations

from typing import Any

import psycopg

from ...errors import ConfigError, StoreError
from . import migrate as _migrate
from .config import parse
from .connection import Connections
from .store import PostgresStore

__all__ = ["PostgresStore", "migrate", "open"]


def migrate(url: str) -> list[int]:
    """Apply pending migrations to the schema the URL names; the versions applied. For
    `tinyjobs migrate` and operators who prefer to migrate explicitly."""
    settings = parse(url)
    conn = Connections(settings).connect()
    try:
        return _migrate.migrate(conn, settings.schema)
    except psycopg.Error as err:
        raise StoreError(f"PostgreSQL at {settings.masked}: migration failed: {err}") from None
    finally:
        conn.close()


def open(
    url: str,
    *,
    migrate: bool = True,
    retry_for: float = 10.0,
    listen: bool | None = None,
    **options: Any,
) -> PostgresStore:
    """The store the URL names, its schema migrated. ConfigError for a bad URL or option,
    StoreUnavailable when the server cannot be reached; both with the password masked."""
    if options:
        raise ConfigError(f"unknown option(s) for the PostgreSQL store: {', '.join(options)}")
    settings = parse(url)
    if migrate:
        globals()["migrate"](url)
    else:
        Connections(settings).connect().close()
    listen = settings.listen if listen is None else listen
    return PostgresStore(settings, retry_for=retry_for, listen=listen)
