"""The arrays the async PostgreSQL store packs itself (tinyjobs/stores/postgres/packed.py) read
back on the server as the values psycopg would have sent, and whatever the packer cannot be
sure of is left to psycopg."""

from __future__ import annotations

import asyncio
import math

import psycopg
import pytest

from tinyjobs.stores.postgres import packed

TEXTS = ["", "job", "ünï €😀", 'a,b{c}"d\\e', "NULL", None, "x" * 5000]
FLOATS = [0.0, -0.0, 1.5, -2.25e-300, 1e308, 0.1, math.inf, -math.inf, None]
INTS = [0, 1, -1, 2**31 - 1, -(2**31), None]


def _read_back(postgres_url: str, value: object, cast: str) -> object:
    async def main() -> object:
        conn = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
        try:
            assert packed.register(conn)
            cur = await conn.execute(f"SELECT %(v)b::{cast}", {"v": value})
            row = await cur.fetchone()
            assert row is not None
            return row[0]
        finally:
            await conn.close()

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("kind", "values", "cast"),
    [
        (packed.text, TEXTS, "text[]"),
        (packed.text, [None, None], "text[]"),
        (packed.float8, FLOATS, "float8[]"),
        (packed.float8, [None], "float8[]"),
        (packed.int4, INTS, "int[]"),
    ],
)
def test_packed_arrays_read_back_as_the_values_given(postgres_url, kind, values, cast):
    value = kind(values)
    assert value is not None
    assert _read_back(postgres_url, value, cast) == values


def test_a_nan_reads_back_as_nan(postgres_url):
    [back] = _read_back(postgres_url, packed.float8([math.nan]), "float8[]")  # type: ignore[misc]
    assert math.isnan(back)


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("ids", ["a", "nul\x00inside"]),  # psycopg and the server refuse it: their error
        ("ids", ["a", 1]),
        ("ids", ["a", b"bytes"]),
        ("priorities", [1, 2**31]),  # out of int4: the server's range error, as before
        ("priorities", [1, True]),
        ("priorities", [1, 1.5]),
        ("delays", [1.0, 1]),
        ("delays", [1.0, "1"]),
    ],
)
def test_what_the_packer_is_not_sure_of_is_left_to_psycopg(name, values):
    assert packed.ENQUEUE[name](values) is None
    assert packed.pack({name: values})[name] is values


def test_pack_packs_the_enqueue_arrays_and_leaves_the_rest():
    params = {"now": None, "ids": ["a", "b"], "priorities": [0, 1], "keeps": [1.0, 2.0], "errors": []}
    out = packed.pack(params)
    assert isinstance(out["ids"], packed.TextArray)
    assert isinstance(out["priorities"], packed.Int4Array)
    assert isinstance(out["keeps"], packed.Float8Array)
    assert out["now"] is None and out["errors"] == []  # an empty array goes as it is
    assert params["ids"] == ["a", "b"]  # the caller's parameters are not changed
