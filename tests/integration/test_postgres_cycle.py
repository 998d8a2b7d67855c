"""cycle.py: the worker's cycle (m008's settle_claim) through libpq itself. Binary parameters
through oneflush.exchange; the rows read from the result as a cursor reads them; a cycle whose
arrays cannot be packed goes through a cursor, with psycopg's own error."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import pq

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import claims, cycle, packed, rows, settle
from tinyjobs.stores.postgres.oneflush import Prepared, exchange

ON = {"default": QueuePolicy("default", lease=30)}
ARRAY_ECHO = Prepared("SELECT $1::text[], $2::float8[], $3::int4", (1009, 1022, 23))


def test_binary_parameters_go_with_text_ones(postgres_url):
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
        names = bytes(packed.text(["a", None, "é"]))
        delays = bytes(packed.float8([1.5, None]))
        [result] = exchange(conn, [(ARRAY_ECHO, (names, delays, 7))])
        assert result.status == pq.ExecStatus.TUPLES_OK and result.fformat(0) == 1
        with conn.cursor() as cur:
            loaded = cur.execute("SELECT %s::text[], %s::float8[], 7", (["a", None, "é"], [1.5, None]))
            assert cycle_rows(conn, result) == loaded.fetchall()


def cycle_rows(conn, result):
    from psycopg.adapt import Transformer

    loader = Transformer(conn)
    loader.set_pgresult(result)
    return loader.load_rows(0, result.ntuples, tuple)


def test_the_direct_cycle_returns_what_the_cursor_returns(postgres_store):
    """The same cycle twice on the same jobs' twins: once through libpq, once through a cursor
    (queries.sql's settle_claim); the rows differ only in what each claim made anew."""
    store, holder = postgres_store, Holder.current()
    store.enqueue([NewJob(id=f"j{i}", task="t", payload=f'{{"i": {i}}}') for i in range(8)], now=1000.0)
    claimed = store.claim(ON, holder, 4, now=1000.0)
    conn = store._conns.get()[0]

    def sent(batch, now):
        params = claims.params(store.schema, ON, holder, 2, now)
        params.update(settle.arrays([Settlement(c.job.id, c.token, "done", result="1") for c in batch]))
        return params

    direct = cycle.run(conn, store.schema, store.q["settle_claim"], sent(claimed[:2], 1001.0))
    with conn.cursor() as cur:
        cur.execute(store.q["settle_claim"], sent(claimed[2:], 1001.0))
        cursor = cur.fetchall()
    assert len(direct) == len(cursor) == 3
    assert [type(v) for v in direct[0]] == [type(v) for v in cursor[0]]
    applied, wake, jobs = settle.read_cycle(direct, 2)
    assert applied == [True, True] and wake == set()
    assert [c.job.id for c in jobs] == ["j4", "j5"] and jobs[0].job.args == {"i": 4}
    assert [c.job.id for c in settle.read_cycle(cursor, 2)[2]] == ["j6", "j7"]
    own = {rows.ID, rows.PAYLOAD, rows.COLUMNS.index("seq"), claims.CLAIMED["token"]}  # each job's
    for a, b in zip(direct[1:], cursor[1:], strict=True):
        assert [type(v) for v in a] == [type(v) for v in b]
        assert {i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y} <= own


def test_a_value_that_cannot_be_packed_goes_through_a_cursor(postgres_store):
    """An error text with a NUL: packed.py leaves it to psycopg, and the server refuses it, as
    the cursor's cycle always did; the job stays running and the connection usable."""
    store, holder = postgres_store, Holder.current()
    store.enqueue([NewJob(id="a", task="t")], now=1000.0)
    [one] = store.claim(ON, holder, 1, now=1000.0)
    assert (
        cycle.values(
            settle.arrays([Settlement("a", one.token, "fail", error="x\x00y")])
            | claims.params(store.schema, ON, holder, 1, 1001.0)
        )
        is None
    )
    with pytest.raises(psycopg.DataError):  # the server refuses the 0x00 psycopg sends
        store.settle_and_claim(
            [Settlement("a", one.token, "fail", error="x\x00y")], ON, holder, 1, now=1001.0
        )
    assert store.get("a").state == "running"
    applied, _ = store.settle_and_claim(
        [Settlement("a", one.token, "fail", error="xy")], ON, holder, 1, now=1001.0
    )
    assert applied == [True] and store.get("a").error == "xy"
