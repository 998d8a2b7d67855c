"""Versioned schema migrations, applied on open under a transaction-level advisory lock, so that
processes starting together migrate once and the others wait, then find the schema current."""

from __future__ import annotations

import psycopg
from psycopg import sql

from ...errors import StoreError
from .sqlfiles import compose, migrations

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('tinyjobs-migrate/' || %s, 0))"


def applied_versions(conn: psycopg.Connection, schema: str) -> set[int]:
    """The versions applied to `schema`, none when it has no tables yet."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)", (sql.Identifier(schema, "migrations").as_string(None),))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return set()
        cur.execute(sql.SQL("SELECT version FROM {}").format(sql.Identifier(schema, "migrations")))
        return {int(version) for (version,) in cur.fetchall()}


def current_version(conn: psycopg.Connection, schema: str) -> int:
    """The schema's newest applied version, 0 when it has none (no tables yet)."""
    return max(applied_versions(conn, schema), default=0)


def migrate(conn: psycopg.Connection, schema: str) -> list[int]:
    """Bring `schema` up to date in one transaction; returns the versions applied (none when it
    was current). Atomic: all pending migrations apply together or not at all. Every version
    not on record is applied, in order, not only those above the newest on record: two
    migrations written side by side (one numbered below the other but landed after it) then
    both reach a schema that one of them already migrated."""
    wanted = migrations()
    latest = wanted[-1][0] if wanted else 0
    if {version for version, _ in wanted} <= applied_versions(conn, schema):
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
        have = applied_versions(conn, schema)
        for version, text in wanted:
            if version in have:
                continue
            cur.execute(compose(text, schema).encode())
            cur.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(sql.Identifier(schema, "migrations")),
                (version,),
            )
            applied.append(version)
    conn.commit()
    if max(have, default=0) > latest:
        raise StoreError(f"schema {schema!r} is at version {max(have)}, newer than this tinyjobs")
    return applied
