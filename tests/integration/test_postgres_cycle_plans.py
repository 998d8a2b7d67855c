"""PostgreSQL: the worker's cycle functions plan without sequential scans whatever the tables'
size when a session first calls them (m010). Their generic plans are made once per session: a worker that
started on a small table kept a plan that read the whole jobs table at every claim, so every
claim grew with the finished jobs. Each cycle here runs in a transaction of its own on one
session, and its table counters are read before it commits (pg_stat_xact_user_tables: this
transaction's own, exact, not the cluster's delayed statistics)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import claims, settle

T0 = 1_700_000_000.0
HOLDER = Holder("h/b", 1, 1)
POLICIES = {"default": QueuePolicy(name="default")}
SETTINGS = {"enable_seqscan=off", "enable_bitmapscan=off", "enable_hashjoin=off", "enable_mergejoin=off"}

_COUNTS = """
SELECT seq_scan, seq_tup_read FROM pg_stat_xact_user_tables
WHERE schemaname = %s AND relname = 'jobs'
"""


def test_the_cycle_functions_carry_their_planner_settings(postgres_store, postgres_url):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.proname, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname IN ('settle_claim', 'claim_free')",
            (postgres_store.schema,),
        ).fetchall()
    assert {name: set(config or ()) for name, config in rows} == {
        "settle_claim": SETTINGS,
        "claim_free": SETTINGS,
    }


class Session:
    """One worker-like session calling settle_claim itself, a transaction per cycle."""

    def __init__(self, store: Any, url: str) -> None:
        self.store = store
        self.conn = psycopg.connect(url)
        self.held: list[tuple[str, str]] = []  # (job id, token) claimed, not yet settled

    def cycle(self, limit: int, now: float) -> tuple[int, int, int]:
        """Settle what is held as done, claim up to `limit`: (claimed, this transaction's
        sequential scans of jobs, rows they read)."""
        sent = claims.params(self.store.schema, POLICIES, HOLDER, limit, now)
        settled = [Settlement(job_id=i, token=t, outcome="done") for i, t in self.held]
        sent.update(settle.arrays(settled))
        rows = self.conn.execute(self.store.q["settle_claim"], sent).fetchall()
        applied, _, claimed = settle.read_cycle(rows, len(settled))
        assert all(applied)
        counts = self.conn.execute(_COUNTS, (self.store.schema,)).fetchone()
        self.conn.commit()
        assert counts is not None
        self.held = [(c.job.id, c.token) for c in claimed]
        return (len(claimed), *counts)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def session(postgres_store, postgres_url):
    s = Session(postgres_store, postgres_url)
    yield s
    s.close()


def test_a_session_planned_on_a_small_table_claims_and_settles_by_index(postgres_store, session):
    # The session's first cycle plans every statement on a table of three jobs.
    postgres_store.enqueue([NewJob(id=f"first{i}", task="t") for i in range(3)], now=T0)
    assert session.cycle(16, T0 + 1)[0] == 3
    # Then 1,200 more jobs, drained by the same session 16 at a time, as a worker would.
    postgres_store.enqueue([NewJob(id=f"j{i:05d}", task="t") for i in range(1200)], now=T0 + 2)
    seen = []
    for k in range(80):
        seen.append(session.cycle(16, T0 + 3 + k))
    assert sum(c[0] for c in seen) == 1200
    # No cycle read the table in a sequential scan: the claimed jobs were leased by their id
    # (before m010: two sequential scans of every row per cycle, the last ones reading ~7,000).
    assert [(seq, rows) for _, seq, rows in seen] == [(0, 0)] * 80
