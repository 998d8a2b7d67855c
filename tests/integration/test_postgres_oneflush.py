"""oneflush.exchange (the single enqueue's statements in one write): results in the order sent,
each statement prepared once per connection, the first error raised as psycopg raises it with
the connection left usable, and the store's single enqueue over it."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg import pq

from tinyjobs.stores.base import NewJob
from tinyjobs.stores.postgres.enqueue import FLOAT8, INT4, TEXT
from tinyjobs.stores.postgres.oneflush import Prepared, exchange

BEGIN, COMMIT = Prepared("BEGIN", ()), Prepared("COMMIT", ())
ECHO = Prepared(
    "SELECT $1::text || '!', $2::int4 + 1, $3::float8, $4::text IS NULL", (TEXT, INT4, FLOAT8, TEXT)
)
DIVIDE = Prepared("SELECT 1 / $1", (INT4,))


def prepared_names(conn: psycopg.Connection) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT name FROM pg_prepared_statements")
        return {row[0] for row in cur.fetchall()}


@pytest.fixture
def conn(postgres_url):
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
        yield conn


def test_results_come_back_in_order_with_the_parameters_as_sent(conn):
    results = exchange(
        conn, [(BEGIN, ()), (ECHO, ("a'b", 41, 0.1, None)), (ECHO, ("é", -2, 1e300, "x")), (COMMIT, ())]
    )
    ok, rows = pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK
    assert [r.status for r in results] == [ok, rows, rows, ok]
    echoed = [
        (r.get_value(0, 0), r.get_value(0, 1), r.get_value(0, 2), r.get_value(0, 3)) for r in results[1:3]
    ]
    assert echoed[0] == (b"a'b!", (42).to_bytes(4, "big"), bytes.fromhex("3fb999999999999a"), b"\x01")
    assert echoed[1][0] == "é!".encode() and echoed[1][1] == (-1).to_bytes(4, "big", signed=True)
    assert echoed[1][3] == b"\x00"
    assert conn.info.transaction_status == pq.TransactionStatus.IDLE
    assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF


def test_each_statement_is_prepared_once_per_connection(conn):
    exchange(conn, [(ECHO, ("a", 1, 1.0, None)), (ECHO, ("b", 2, 2.0, None))])
    assert ECHO.name.decode() in prepared_names(conn)
    # Sent again without its Parse: a second Parse of the same name would fail (42P05).
    [again] = exchange(conn, [(ECHO, ("c", 3, 3.0, None))])
    assert again.get_value(0, 0) == b"c!"


def test_the_first_error_is_raised_and_the_rest_skipped(conn):
    with pytest.raises(pgerrors.DivisionByZero):
        exchange(conn, [(BEGIN, ()), (DIVIDE, (0,)), (ECHO, ("never", 1, 1.0, None)), (COMMIT, ())])
    # The COMMIT was skipped: the transaction is left aborted for the caller to roll back.
    assert conn.info.transaction_status == pq.TransactionStatus.INERROR
    conn.rollback()
    assert conn.execute("SELECT 7").fetchone() == (7,)
    [ok] = exchange(conn, [(DIVIDE, (1,))])
    assert ok.status == pq.ExecStatus.TUPLES_OK


def test_a_statement_that_fails_to_prepare_is_prepared_again_next_time(conn):
    broken = Prepared("SELECT no_such_column_here", ())
    with pytest.raises(pgerrors.UndefinedColumn):
        exchange(conn, [(broken, ())])
    with pytest.raises(pgerrors.UndefinedColumn):  # not "prepared statement does not exist"
        exchange(conn, [(broken, ())])
    assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF


def test_the_single_enqueue_adds_the_job_and_then_finds_it(postgres_store):
    job = NewJob(id="one", task="t", queue="q", payload='{"a":1}', delay=5)
    added = postgres_store.enqueue([job], now=1000.0)[0]
    assert (added.created, added.state, added.due_at, added.created_at) == (True, "scheduled", 1005.0, 1000.0)
    again = postgres_store.enqueue([job], now=1001.0)[0]
    assert (again.created, again.id, again.due_at) == (False, "one", 1005.0)
    stored = postgres_store.get("one", now=1001.0)
    assert (stored.args, stored.due_at, stored.created_at) == ({"a": 1}, 1005.0, 1000.0)


def test_a_text_with_a_nul_is_refused_not_cut_short(conn):
    # libpq would send a text parameter up to its NUL: "ab\x00c" would be written as "ab".
    with pytest.raises(psycopg.DataError, match="NUL"):
        exchange(conn, [(ECHO, ("ab\x00c", 1, 1.0, None))])
    assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF
    [ok] = exchange(conn, [(ECHO, ("abc", 1, 1.0, None))])
    assert ok.get_value(0, 0) == b"abc!"


class _Recording:
    """A connection whose libpq calls are recorded in order (the rest passes through)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn
        self.calls: list[str] = []
        self.pgconn = self._PGconn(conn.pgconn, self.calls)
        self.info = conn.info

    def wait(self, gen, *args, **kwargs):
        self.calls.append("wait")
        return self._conn.wait(gen, *args, **kwargs)

    class _PGconn:
        def __init__(self, pgconn, calls: list[str]) -> None:
            self._pgconn, self._calls = pgconn, calls

        def __getattr__(self, name: str):
            value = getattr(self._pgconn, name)
            if callable(value) and name.startswith(("send_", "pipeline_sync", "flush")):
                self._calls.append(name)
            return value


def test_every_statement_is_queued_before_the_one_write_and_the_one_wait(conn):
    recording = _Recording(conn)
    exchange(recording, [(BEGIN, ()), (ECHO, ("a", 1, 1.0, None)), (COMMIT, ())])
    sync = recording.calls.index("pipeline_sync")  # PQpipelineSync flushes: the one write
    assert set(recording.calls[:sync]) == {"send_prepare", "send_query_prepared"}  # no flush before
    assert recording.calls[sync + 1] == "wait" and recording.calls.count("wait") == 1
