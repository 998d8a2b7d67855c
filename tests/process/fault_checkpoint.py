"""An enqueuing process that test_sqlite_faults.py kills with SIGKILL at random moments:
`python fault_checkpoint.py URL ACKED_FILE FIRST`. One thread enqueues batches of 20 jobs and
writes their ids to ACKED_FILE once enqueue returned; another checkpoints the WAL back to back
(`PRAGMA wal_checkpoint(TRUNCATE)`, on a connection of its own), so that a kill often lands in
the middle of one."""

from __future__ import annotations

import sqlite3
import sys
import threading

import tinyjobs
from tinyjobs.stores.base import NewJob


def checkpoint(path: str) -> None:
    conn = sqlite3.connect(path, timeout=5, isolation_level=None)
    while True:
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.OperationalError:
            pass  # busy: the enqueuer writes; try again


def main(url: str, acked_path: str, first: int) -> None:
    app = tinyjobs.App(url)
    app.store.counts()  # open (and migrate) before the checkpointer starts
    threading.Thread(target=checkpoint, args=(url.removeprefix("sqlite:///"),), daemon=True).start()
    with open(acked_path, "a") as acked:
        n = first
        while True:
            ids = [f"k{n + i}" for i in range(20)]
            app.store.enqueue(_jobs(ids))
            acked.write("\n".join(ids) + "\n")
            acked.flush()
            n += 20


def _jobs(ids: list[str]) -> list[NewJob]:
    return [NewJob(job_id, "work", payload='{"pad": "' + "x" * 500 + '"}') for job_id in ids]


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
