"""What a PostgreSQL worker's cycle costs as the table grows under it (issue 14, "flat as the store
grows"): a session that made its plans on a small table, as a worker that starts on an empty
queue does, then runs a job at a time while the table holds more and more finished jobs.

The worker's cycle functions plan each statement once per session, at its first call, from the
tables' sizes then (docs/measured.md, "pg-suite"). This opens a store on a fresh database,
runs one cycle (the plans are made), then fills the table with --finished finished jobs from
another session, then times --cycles cycles of the first session (one job enqueued, then
settled and the next claimed, as at a low rate) and reports, per cycle: its server backend's
CPU (/proc/<pid>/stat, same host) and the rows it read in sequential scans of jobs
(pg_stat_xact_user_tables, read inside each cycle's transaction: exact).

Run it with the interpreter of the venv whose tinyjobs you measure, from a directory without a
`tinyjobs` package (it does not put its tree on the path):

    cd /tmp && /tmp/tj-main/bin/python /path/to/benchmarks/pg_plan_growth.py --finished 100000
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one local process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432", help="URL without a db")
    ap.add_argument("--db", default="tinyjobs_plan_growth")
    ap.add_argument("--finished", type=int, default=100_000, help="finished jobs put in the table")
    ap.add_argument("--cycles", type=int, default=200)
    args = ap.parse_args()

    import psycopg
    from psycopg import sql

    import tinyjobs
    from tinyjobs.holder import Holder
    from tinyjobs.stores.base import QueuePolicy, Settlement
    from tinyjobs.stores.postgres import claims, settle

    with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(args.db)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.db)))
    url = f"{args.server}/{args.db}"
    app = tinyjobs.App(url)

    @app.task
    def noop(run: object, i: int) -> None:
        pass

    store = app.store
    policies = {"default": QueuePolicy(name="default")}
    holder = Holder.current()
    conn = psycopg.connect(url)  # the measured session: a worker's, calling settle_claim itself
    pid = conn.info.backend_pid
    held: list[Settlement] = []

    def cycle() -> int:
        """Settle what is held, claim up to 8: this transaction's rows read in sequential
        scans of jobs."""
        nonlocal held
        sent = claims.params(store.schema, policies, holder, 8, None)
        sent.update(settle.arrays(held))
        rows = conn.execute(store.q["settle_claim"], sent).fetchall()
        counts = conn.execute(
            "SELECT seq_tup_read FROM pg_stat_xact_user_tables WHERE relname = 'jobs'"
        ).fetchone()
        conn.commit()
        held = [
            Settlement(job_id=c.job.id, token=c.token, outcome="done")
            for c in settle.read_cycle(rows, len(held))[2]
        ]
        assert counts is not None
        return int(counts[0])

    noop.enqueue(i=0)
    cycle()  # the plans are made here, on a table of one job
    filled = time.perf_counter()
    filler: Any = tinyjobs.App(url).store
    batch = [{"i": k} for k in range(1000)]
    taken: list[Settlement] = []
    for _ in range(args.finished // 1000):
        noop.enqueue_many(batch)
        while True:
            done, got = filler.settle_and_claim(taken, policies, holder, 500)
            taken = [Settlement(job_id=c.job.id, token=c.token, outcome="done") for c in got]
            if not taken:
                break
    filler.close()
    print(f"filled with {args.finished:,} finished jobs in {time.perf_counter() - filled:.0f} s")

    reads = []
    cpu0, wall0 = backend_cpu(pid), time.perf_counter()
    for k in range(args.cycles):
        noop.enqueue(i=k)
        reads.append(cycle())
    cpu1, wall1 = backend_cpu(pid), time.perf_counter()
    n = args.cycles
    print(
        f"{n} cycles on {args.finished:,} finished jobs: server backend {1e6 * (cpu1 - cpu0) / n:,.0f} us "
        f"a cycle, wall {1e3 * (wall1 - wall0) / n:.2f} ms a cycle (enqueue included), rows read in "
        f"sequential scans of jobs {sum(reads) / n:,.0f} a cycle"
    )
    conn.close()
    app.close()
    with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(args.db)))


if __name__ == "__main__":
    main()
