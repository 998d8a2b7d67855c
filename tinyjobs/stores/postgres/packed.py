"""Arrays packed in PostgreSQL's binary array format by `struct`: psycopg's generic list dumper
makes a few Python calls per element. For the async store's batch enqueue: 120-190 us for the
15 arrays of a batch of 50 jobs, all of it in the turn of the event loop that sends the
statement; packed here it is about 50 us, and the async store does it in a turn of its own
(aio.py `_packing`; docs/asyncio.md, "What keeps each turn of the loop short"). For the sync
store's worker cycle (`settle_claim`, 10 arrays of a few elements each): psycopg's dumping was
most of the worker's own CPU in that call (CYCLE below).

Only what the server is certain to read as the values psycopg would have sent is packed: lists
of str (no NUL) or None as text[], of int (not bool) in int4's range or None as int4[], of float
or None as float8[] (the types the `enqueue` statement casts them to), on a connection whose
client encoding is UTF-8. Anything else is left as the list it was, for psycopg to dump (and to
refuse with its own error), so the statement, its parameters' values and its errors stay the
sync store's."""

from __future__ import annotations

import struct
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

_HEAD = struct.Struct("!iiIii")  # dimensions, has nulls, element oid; one dimension: size, lower bound
_NULL = b"\xff\xff\xff\xff"
_LEN = struct.Struct("!i").pack
_FLOAT8 = struct.Struct("!id").pack  # length 8, value
_INT4 = struct.Struct("!ii").pack  # length 4, value
TEXT, FLOAT8, INT4 = 25, 701, 23


class _Packed(bytes):
    """An array already in binary form; its dumper sends it as it is."""


class TextArray(_Packed):
    pass


class Float8Array(_Packed):
    pass


class Int4Array(_Packed):
    pass


def _dumper(oid: int) -> type[Dumper]:
    class PackedDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            return bytes(obj)

    PackedDumper.oid = oid
    return PackedDumper


def register(conn: psycopg.Connection | psycopg.AsyncConnection) -> bool:
    """Let `conn` send packed arrays; False (nothing registered) unless its client encoding is
    UTF-8, the encoding `text` packs its strings in."""
    if conn.info.encoding != "utf-8":
        return False
    conn.adapters.register_dumper(TextArray, _dumper(1009))
    conn.adapters.register_dumper(Float8Array, _dumper(1022))
    conn.adapters.register_dumper(Int4Array, _dumper(1007))
    return True


def text(values: list[Any]) -> TextArray | None:
    """`values` as text[], or None when one is neither a str without NUL nor None."""
    parts: list[bytes] = []
    hasnull = 0
    for value in values:
        if value is None:
            parts.append(_NULL)
            hasnull = 1
        elif type(value) is str and "\x00" not in value:
            data = value.encode()
            parts.append(_LEN(len(data)))
            parts.append(data)
        else:
            return None
    return TextArray(_HEAD.pack(1, hasnull, TEXT, len(values), 1) + b"".join(parts))


def float8(values: list[Any]) -> Float8Array | None:
    """`values` as float8[], or None when one is neither a float nor None."""
    if not all(value is None or type(value) is float for value in values):
        return None
    hasnull = 1 if None in values else 0
    body = b"".join(_NULL if value is None else _FLOAT8(8, value) for value in values)
    return Float8Array(_HEAD.pack(1, hasnull, FLOAT8, len(values), 1) + body)


def int4(values: list[Any]) -> Int4Array | None:
    """`values` as int4[], or None when one is not an int (or None) in int4's range."""
    if not all(value is None or type(value) is int for value in values):
        return None
    try:
        body = b"".join(_NULL if value is None else _INT4(4, value) for value in values)
    except struct.error:  # out of int4's range: psycopg's dumper and the server say so
        return None
    hasnull = 1 if None in values else 0
    return Int4Array(_HEAD.pack(1, hasnull, INT4, len(values), 1) + body)


# The element type of each array parameter of the `enqueue` statement (queries.sql casts).
ENQUEUE = {
    "ids": text,
    "tasks": text,
    "queues": text,
    "payloads": text,
    "priorities": int4,
    "delays": float8,
    "ats": float8,
    "keys": text,
    "groups": text,
    "afters": text,
    "max_attempts": int4,
    "dedupes": float8,
    "keeps": float8,
    "states": text,
    "errors": text,
}


# The element type of each array parameter of the `settle_claim` statement (queries.sql casts).
CYCLE = {
    "ids": text,
    "tokens": text,
    "outcomes": text,
    "results": text,
    "errors": text,
    "delays": float8,
    "executions": text,
    "queues": text,
    "leases": float8,
    "free": text,
}


def pack(params: dict[str, Any], kinds: dict[str, Any] = ENQUEUE) -> dict[str, Any]:
    """`params` with each non-empty array of `kinds` packed where it can be (see above)."""
    out = dict(params)
    for name, kind in kinds.items():
        values = out.get(name)
        if isinstance(values, list) and values:
            packed = kind(values)
            if packed is not None:
                out[name] = packed
    return out
