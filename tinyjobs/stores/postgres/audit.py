"""`tinyjobs check` for PostgreSQL: fsync (Neon excepted), standby, the server's default
synchronous_commit, and autovacuum (a queue table without it slows down as jobs pass). One
autocommit connection, each probe its own statement, so a refused probe is NOT CHECKED with the
reason and does not spoil the next. Nothing is written."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from tinyjobs.errors import StoreUnavailable
from tinyjobs.findings import Finding, failed, not_checked, passed, warned
from tinyjobs.urls import mask

from .connection import one_line

_RANK = {"off": 0, "local": 1, "remote_write": 2, "on": 3, "remote_apply": 4}


def audit(url: str) -> list[Finding]:
    """Every finding for the PostgreSQL server that `url` names."""
    conn = _connect(url)
    try:
        return [_fsync(conn), _standby(conn), _synchronous_commit(conn), _autovacuum(conn)]
    finally:
        conn.close()


def _conninfo(url: str) -> str:
    """`url` without the query options libpq does not know (tinyjobs' own, such as schema)."""
    parts = urlsplit(url)
    known = {o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults()}
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k in known]
    return urlunsplit(parts._replace(scheme="postgresql", query=urlencode(query)))


def _connect(url: str) -> psycopg.Connection:
    try:
        conninfo = _conninfo(url)
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
    except (psycopg.Error, ValueError) as err:
        raise StoreUnavailable(
            f"PostgreSQL at {mask(url)} is unreachable or refused us: {one_line(err)}"
        ) from None


def _probe(conn: psycopg.Connection, sql: str) -> tuple[tuple | None, str]:
    """(first row, "") or (None, why) when the server will not say."""
    try:
        return conn.execute(sql).fetchone(), ""
    except psycopg.errors.OperationalError:
        raise
    except psycopg.Error as err:
        code = f" ({err.sqlstate})" if err.sqlstate else ""
        return None, f"{type(err).__name__}{code}: {str(err).strip()}"


def _neon(conn: psycopg.Connection) -> str | None:
    """Neon's timeline id when this is a Neon compute, else None."""
    row, _ = _probe(conn, "SELECT current_setting('neon.timeline_id', true)")
    return row[0] if row and row[0] else None


def _fsync(conn: psycopg.Connection) -> Finding:
    row, why = _probe(conn, "SHOW fsync")
    if row is None:
        return not_checked("fsync", f"SHOW fsync failed: {why}")
    if row[0] == "on":
        return passed("fsync", "on")
    timeline = _neon(conn)
    if timeline:
        return passed("fsync", f"{row[0]} (Neon, timeline {timeline}: its storage keeps the WAL)")
    return failed(
        "fsync",
        f"{row[0]}: a crash of the server can lose committed jobs or corrupt the cluster",
        "fsync = on in postgresql.conf, then reload",
    )


def _standby(conn: psycopg.Connection) -> Finding:
    row, why = _probe(conn, "SELECT pg_is_in_recovery()")
    if row is None:
        return not_checked("pg_is_in_recovery()", why)
    if row[0]:
        return failed(
            "pg_is_in_recovery()",
            "true: this server is a standby and refuses writes",
            "point the URL at the primary (add target_session_attrs=read-write)",
        )
    return passed("pg_is_in_recovery()", "false (a primary)")


def _synchronous_commit(conn: psycopg.Connection) -> Finding:
    """The default a new session gets (pg_settings.reset_val, with its source), else SHOW."""
    row, why = _probe(
        conn,
        "SELECT reset_val, source FROM pg_settings WHERE name = 'synchronous_commit'",
    )
    if row is None:
        row, why2 = _probe(conn, "SHOW synchronous_commit")
        if row is None:
            return not_checked("synchronous_commit", f"{why}; {why2}")
        row = (row[0], "SHOW")
    value, source = row
    seen = f"{value} (server default, from {source})"
    if _RANK.get(value, 3) >= _RANK["on"]:
        return passed("synchronous_commit", seen)
    note = (
        "tinyjobs' own connections raise it to on, but jobs enqueued through your own "
        "connection inside your transaction (conn=) commit under this default"
    )
    if value == "off":
        return warned(
            "synchronous_commit",
            f"{seen}: a server crash can lose the last commits; {note}",
            "synchronous_commit = on (server, or ALTER ROLE ... SET synchronous_commit = on)",
        )
    return passed("synchronous_commit", f"{seen}; {note}")


def _autovacuum(conn: psycopg.Connection) -> Finding:
    """Every job leaves dead row versions behind (claimed, settled, purged); without
    autovacuum (or the statistics it runs on) they are never cleared, and each claim walks
    past more of them: the queue slows down with every job it has run."""
    row, why = _probe(conn, "SELECT current_setting('autovacuum'), current_setting('track_counts')")
    if row is None:
        return not_checked("autovacuum", why)
    autovacuum, track_counts = row
    if autovacuum == "on" and track_counts == "on":
        return passed("autovacuum", "on")
    seen = f"autovacuum = {autovacuum}, track_counts = {track_counts}"
    return warned(
        "autovacuum",
        f"{seen}: the jobs table is never vacuumed, so claims slow down as jobs pass through it",
        "autovacuum = on and track_counts = on in postgresql.conf, then reload "
        "(or VACUUM the tinyjobs schema's tables from cron)",
    )
