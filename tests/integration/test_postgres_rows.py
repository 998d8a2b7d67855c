"""The PostgreSQL store reads its rows by column name: the indices of rows.py (COLUMNS, then each
query's named tail) must be where the server puts those columns. Each statement is prepared and
described on a real server, without running it, so a column added to the SQL or to COLUMNS that
would shift an index fails here instead of filling a Job with the wrong values."""

from __future__ import annotations

import re
import secrets

import psycopg
import pytest
from support.postgres_fixtures import drop_schema, postgres_schema_url

from tinyjobs.stores.postgres import claims, enqueue, store
from tinyjobs.stores.postgres import open as open_postgres
from tinyjobs.stores.postgres.rows import NCOLS
from tinyjobs.stores.postgres.sqlfiles import COLUMNS, queries

ONE = {name: enqueue.WRITTEN[name] for name in ("replaced", "now")}  # no `notified`: see added_one
TAILS = {
    "enqueue": enqueue.WRITTEN,
    "enqueue_one": ONE,
    "enqueue_existing": enqueue.FOUND,
    "claim": claims.CLAIMED,
    "claim_free": claims.CLAIMED,
    "claim_limited": claims.CLAIMED,
    "get": store.GOT,
    "jobs": store.LISTED,
}


@pytest.fixture
def schema(postgres_url):
    """A migrated schema of the store's own, dropped afterwards."""
    name = f"t_{secrets.token_hex(6)}"
    open_postgres(postgres_schema_url(postgres_url, name)).close()
    yield name
    drop_schema(postgres_url, name)


def described(conn: psycopg.Connection, text: str) -> list[str]:
    """The names of the columns `text` returns, from the server's description of it prepared."""
    numbers: dict[str, int] = {}
    text = re.sub(r"%\((\w+)\)[sb]", lambda m: f"${numbers.setdefault(m[1], len(numbers) + 1)}", text)
    name = f"described_{secrets.token_hex(4)}".encode()
    prepared = conn.pgconn.prepare(name, text.replace("%%", "%").encode())
    assert prepared.status == psycopg.pq.ExecStatus.COMMAND_OK, prepared.error_message
    description = conn.pgconn.describe_prepared(name)
    return [description.fname(i).decode() for i in range(description.nfields)]


@pytest.mark.parametrize("query", sorted(TAILS))
def test_rows_are_read_where_the_server_puts_each_column(postgres_url, schema, query):
    with psycopg.connect(postgres_url.split("?")[0]) as conn:
        names = described(conn, queries(schema)[query])
    assert names[:NCOLS] == list(COLUMNS)
    assert {name: names[i] for name, i in TAILS[query].items()} == {name: name for name in TAILS[query]}
