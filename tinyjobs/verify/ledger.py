"""The ledger of `tinyjobs verify`: the side effect every verify job applies, outside the store
under test. A SQLite file in verify's temporary directory, shared by its workers:

- `ledger`: one row per job number, written with INSERT OR IGNORE, the idempotency the
  contract asks of a task, so a job that ran twice still applies its effect once;
- `runs`: one row per run of the handler, written as it starts (number, job id, attempt, pid,
  time), so re-runs are counted, a run killed before its effect included, and a number run
  twice at one attempt shows a job enqueued twice.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BUSY_MS = 10_000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    n INTEGER PRIMARY KEY,
    job TEXT NOT NULL,
    at REAL NOT NULL,
    pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    n INTEGER NOT NULL,
    job TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    at REAL NOT NULL
);
"""


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    return conn


def create(path: Path) -> None:
    """Create the ledger file (WAL, so that the workers' writes do not block each other)."""
    conn = _connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
    finally:
        conn.close()


class Writer:
    """The workers' side: one connection per handler thread."""

    def __init__(self, path: Path, pid: int) -> None:
        self.path, self.pid = path, pid
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _connect(self.path)
        return conn

    def started(self, n: int, job_id: str, attempt: int) -> None:
        """Record this run of job number `n` as it starts."""
        self._conn().execute(
            "INSERT INTO runs (n, job, attempt, pid, at) VALUES (?, ?, ?, ?, ?)",
            (n, job_id, attempt, self.pid, time.time()),
        )

    def apply(self, n: int, job_id: str) -> None:
        """Apply the job's side effect, once however often it runs."""
        self._conn().execute(
            "INSERT OR IGNORE INTO ledger (n, job, at, pid) VALUES (?, ?, ?, ?)",
            (n, job_id, time.time(), self.pid),
        )


@dataclass
class Ledger:
    """What the ledger holds: when each number applied its effect, and its runs by attempt."""

    applied: dict[int, float] = field(default_factory=dict)
    applied_ids: dict[int, str] = field(default_factory=dict)
    runs: dict[int, list[int]] = field(default_factory=dict)


def read(path: Path) -> Ledger:
    """Read the whole ledger; sqlite3.Error (or OSError) when it cannot be read."""
    if not path.exists():
        raise OSError(f"the ledger {path} is gone")
    out = Ledger()
    conn = _connect(path)
    try:
        for n, job, at in conn.execute("SELECT n, job, at FROM ledger"):
            out.applied[n], out.applied_ids[n] = at, job
        for n, attempt in conn.execute("SELECT n, attempt FROM runs ORDER BY at"):
            out.runs.setdefault(n, []).append(attempt)
    finally:
        conn.close()
    return out
