"""CPU per job of the PostgreSQL store alone: this process (the client) and its own server
backend (/proc/<backend pid>/stat, same host), without workers. On a shared machine the server
figure counts only this connection's backend, not the other sessions of the cluster.

    python benchmarks/pg_store_cpu.py bulk --jobs 20000      # enqueue_many, 1,000 per call
    python benchmarks/pg_store_cpu.py single --jobs 3000     # one enqueue per call
    python benchmarks/pg_store_cpu.py cycle --jobs 6000      # settle_and_claim, batches of 4
    python benchmarks/pg_store_cpu.py cycle --batch 8        # ... of 8 (a worker of 8 slots)

Also the WAL written per job (pg_current_wal_lsn before and after: the whole cluster's, so
on a shared cluster other sessions' writes are in it) and the rows the jobs table saw per job
(updates, of which HOT).

Each run drops and re-creates the database --db on --server. For an A/B
comparison on a busy machine run two trees at the same time, each on its own --db: both then
see the same load, and compare CPU per job, not jobs/s."""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one local process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _wal(conn: Any) -> int:
    """The cluster's WAL position, in bytes."""
    return int(conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0])


def _rows(conn: Any) -> tuple[int, int]:
    """Updates and HOT updates of the jobs table so far (the statistics lag a commit: read
    them after pg_stat_clear_snapshot, which a new transaction does in autocommit)."""
    row = conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobs'"
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenario", choices=("bulk", "single", "cycle"))
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432", help="URL without a db")
    parser.add_argument("--db", default="tinyjobs_store_cpu")
    parser.add_argument("--batch", type=int, default=4, help="cycle: jobs settled and claimed per call")
    args = parser.parse_args()

    import psycopg
    from psycopg import sql

    import tinyjobs
    from tinyjobs.holder import Holder
    from tinyjobs.stores.base import QueuePolicy, Settlement

    with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(args.db)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.db)))
    app = tinyjobs.App(f"{args.server}/{args.db}")

    @app.task
    def noop(run: object, i: int) -> None:
        pass

    store = app.store
    store.now()
    backend = store._conns.get()[0].info.backend_pid  # this thread's connection
    n = args.jobs
    batch = [{"i": k} for k in range(1000)]
    run: Callable[[], None]
    if args.scenario == "bulk":
        noop.enqueue_many(batch)  # warm up: prepared statements, caches

        def run() -> None:
            for _ in range(n // 1000):
                noop.enqueue_many(batch)

    elif args.scenario == "single":
        for k in range(20):
            noop.enqueue(i=k)

        def run() -> None:
            for k in range(n):
                noop.enqueue(i=k)

    else:
        for _ in range(n // 1000 + 1):
            noop.enqueue_many(batch)
        policies = {"default": QueuePolicy(name="default")}
        holder = Holder.current()
        size = args.batch
        claimed = store.settle_and_claim([], policies, holder, size)[1]

        def run() -> None:
            nonlocal claimed
            for _ in range(n // size):
                done = [Settlement(job_id=c.job.id, token=c.token, outcome="done") for c in claimed]
                claimed = store.settle_and_claim(done, policies, holder, size)[1]

    watch = psycopg.connect(f"{args.server}/{args.db}", autocommit=True)
    wal0, rows0 = _wal(watch), _rows(watch)
    client0, server0, wall0 = own_cpu(), backend_cpu(backend), time.perf_counter()
    run()
    client1, server1, wall1 = own_cpu(), backend_cpu(backend), time.perf_counter()
    wal1, rows1 = _wal(watch), _rows(watch)
    updates, hot = (b - a for a, b in zip(rows0, rows1, strict=True))
    print(
        f"{args.scenario}: {n / (wall1 - wall0):,.0f} jobs/s, "
        f"client {1e6 * (client1 - client0) / n:.1f} us/job, "
        f"server backend {1e6 * (server1 - server0) / n:.1f} us/job, "
        f"WAL {(wal1 - wal0) / n:,.0f} B/job, jobs rows updated {updates / n:.2f}/job "
        f"({hot / n:.2f} HOT)"
    )
    watch.close()
    app.close()


if __name__ == "__main__":
    main()
