"""The worker's cycle (m008's settle_claim) sent through libpq itself (oneflush.py), its rows
read by psycopg's loaders straight from the result.

The statement and its replies are the same as through a psycopg cursor (`Connections.alone`):
one Bind, one Sync, one implicit transaction. What goes is the cursor's work around them, paid
by the worker's loop once per cycle, between a reply and its slots' next jobs: the conversion
of the named placeholders, the prepared-statement bookkeeping, the dumping of 14 parameters, the
selection of the result (docs/measured.md, "pg-drain4"). The arrays are packed as packed.py
packs them; a cycle whose arrays cannot be packed (a value packed.py leaves to psycopg) goes
through the cursor, so psycopg's dumping and its errors stay what they were."""

from __future__ import annotations

import functools
from typing import Any

import psycopg
from psycopg.adapt import Transformer

from . import packed
from .enqueue import FLOAT8, INT4, TEXT
from .oneflush import Param, Prepared, exchange
from .sqlfiles import blocks, compose, without_comments

TEXT_ARRAY, FLOAT8_ARRAY = 1009, 1022
# (parameter, packer) in the statement's order after the arrays' ($11-$14 are scalars).
_ARRAYS = (
    ("ids", packed.text),
    ("tokens", packed.text),
    ("outcomes", packed.text),
    ("results", packed.text),
    ("errors", packed.text),
    ("delays", packed.float8),
    ("executions", packed.text),
    ("queues", packed.text),
    ("leases", packed.float8),
    ("free", packed.text),
)
_TYPES = tuple(TEXT_ARRAY if kind is packed.text else FLOAT8_ARRAY for _, kind in _ARRAYS) + (
    INT4,
    TEXT,
    FLOAT8,
    TEXT,
)


@functools.cache
def statement(schema: str) -> Prepared:
    """cycle.sql's settle_claim composed for `schema`."""
    text = blocks("cycle.sql")["settle_claim"]
    return Prepared(without_comments(compose(text, schema)), _TYPES)


def values(sent: dict[str, Any]) -> list[Param] | None:
    """The statement's parameters from the cursor's (claims.params and settle.arrays), the
    arrays packed; None when one cannot be (empty, or a value packed.py leaves to psycopg)."""
    out: list[Param] = []
    for name, kind in _ARRAYS:
        items = sent[name]
        data = kind(items) if items else None
        if data is None:
            return None
        out.append(bytes(data))
    out += [sent["limit"], sent["holder"], sent["now"], sent["schema"]]
    return out


def run(conn: psycopg.Connection, schema: str, text: str, sent: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run the cycle with the cursor's parameters `sent` in one write and one wait, through
    libpq where its arrays can be packed, else through a cursor with `text` (queries.sql's
    settle_claim); its rows either way."""
    params = values(sent) if getattr(conn, "packs", False) else None
    if params is None:
        with conn.cursor() as cur:
            cur.execute(text, packed.pack(sent, packed.CYCLE) if getattr(conn, "packs", False) else sent)
            return cur.fetchall()
    [result] = exchange(conn, [(statement(schema), params)])
    loader = Transformer(conn)
    loader.set_pgresult(result)
    return loader.load_rows(0, result.ntuples, tuple)
