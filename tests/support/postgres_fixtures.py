"""postgres_store: the PostgreSQL store in a fresh, randomly named schema per test, dropped
afterwards."""

from __future__ import annotations

import secrets
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

__all__ = ["drop_schema", "postgres_schema_url", "postgres_store"]


def postgres_schema_url(url: str, schema: str) -> str:
    """`url` naming `schema` (other query parameters kept)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["schema"] = schema
    return urlunsplit(parts._replace(query=urlencode(query)))


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    query = {k: v for k, v in parse_qsl(parts.query) if k != "schema"}
    conninfo = urlunsplit(parts._replace(query=urlencode(query)))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def postgres_store(postgres_url):
    from tinyjobs.stores.postgres import open as open_postgres

    schema = f"t_{secrets.token_hex(6)}"
    store = open_postgres(postgres_schema_url(postgres_url, schema))
    yield store
    store.close()
    drop_schema(postgres_url, schema)
