"""CPU per job of the PostgreSQL store alone: this process (the client) and its own server
backend (/proc/<backend pid>/stat, same host), without workers. On a shared machine the server
figure counts only this connection's backend, not the other sessions of the cluster.

    python benchmarks/pg_store_cpu.py bulk --jobs 20000      # enqueue_many, 1,000 per call
    python benchmarks/pg_store_cpu.py single --jobs 3000     # one enqueue per call
    python benchmarks/pg_store_cpu.py cycle --jobs 6000      # settle_and_claim, batches of 4

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one local process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenario", choices=("bulk", "single", "cycle"))
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432", help="URL without a db")
    parser.add_argument("--db", default="tinyjobs_store_cpu")
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
        claimed = store.settle_and_claim([], policies, holder, 4)[1]

        def run() -> None:
            nonlocal claimed
            for _ in range(n // 4):
                done = [Settlement(job_id=c.job.id, token=c.token, outcome="done") for c in claimed]
                claimed = store.settle_and_claim(done, policies, holder, 4)[1]

    client0, server0, wall0 = own_cpu(), backend_cpu(backend), time.perf_counter()
    run()
    client1, server1, wall1 = own_cpu(), backend_cpu(backend), time.perf_counter()
    print(
        f"{args.scenario}: {n / (wall1 - wall0):,.0f} jobs/s, "
        f"client {1e6 * (client1 - client0) / n:.1f} us/job, "
        f"server backend {1e6 * (server1 - server0) / n:.1f} us/job"
    )
    app.close()


if __name__ == "__main__":
    main()
