"""Whether a PostgreSQL URL's schema holds a tinyjobs store, without creating anything: the
reading commands of the CLI ask first, since opening a store applies its migrations."""

from __future__ import annotations

import psycopg
from psycopg import sql

from ...errors import StoreUnavailable
from .config import parse
from .connection import Connections, one_line


def has_store(url: str) -> bool:
    """True when the schema that `url` names has tinyjobs' jobs table. StoreUnavailable (URL
    masked) when the server cannot be reached or refuses us."""
    settings = parse(url)
    conn = Connections(settings).connect(autocommit=True)
    try:
        table = sql.Identifier(settings.schema, "jobs").as_string(conn)
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
        return bool(row and row[0])
    except psycopg.Error as err:
        raise StoreUnavailable(f"PostgreSQL at {settings.masked}: {one_line(err)}") from None
    finally:
        conn.close()
