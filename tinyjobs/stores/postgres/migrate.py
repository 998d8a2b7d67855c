"""Versioned schema migrations, applied on open under a transaction-level advisory lock, so that
processes starting together migrate once and the others wait, then find the schema current."""

from __future__ import annotations

import psycopg
from psycopg import sql

from ...errors import StoreError
from .sqlfiles import compose, migrations

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('tinyjobs-migrate/' || %s, 0))"


def current_version(conn: psycopg.Connection, schema: str) -> int:
    """The schema's applied version, 0 when it has none (no tables yet)."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)", (sql.Identifier(schema, "migrations").as_string(None),))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return 0
        cur.execute(
            sql.SQL("SELECT COALESCE(max(version), 0) FROM {}").format(sql.Identifier(schema, "migrations"))
        )
        row = cur.fetchone()
        return int(row[0]) if row else 0


def migrate(conn: psycopg.Connection, schema: str) -> list[int]:
    """Bring `schema` up to date in one transaction; returns the versions applied (none when it
    was current). Atomic: all pending migrations apply together or not at all."""
    wanted = migrations()
    latest = wanted[-1][0] if wanted else 0
    if current_version(conn, schema) >= latest:
        conn.rollback()
        return []
    applied: list[int] = []
    with conn.cursor() as cur:
        cur.execute(_LOCK, (schema,))
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        cur.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
                "applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            ).format(sql.Identifier(schema, "migrations"))
        )
        have = current_version(conn, schema)
        for version, text in wanted:
            if version <= have:
                continue
            cur.execute(compose(text, schema).encode())
            cur.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(sql.Identifier(schema, "migrations")),
                (version,),
            )
            applied.append(version)
    conn.commit()
    if have > latest:
        raise StoreError(f"schema {schema!r} is at version {have}, newer than this tinyjobs")
    return applied
