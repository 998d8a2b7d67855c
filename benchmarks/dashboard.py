"""How fast the dashboard answers on a big store: every page, every /api/ call and /metrics,
the first call and p50/p95 over --requests more, through the WSGI application in this process (the
HTTP server adds the same small cost to each).

    python benchmarks/dashboard.py --url sqlite:////tmp/dash.db
    python benchmarks/dashboard.py --url "postgresql://postgres@127.0.0.1/test?schema=dash_$(date +%s)"
    python benchmarks/dashboard.py --url redis://127.0.0.1:6379/9?prefix=dash

First it fills the store (unless --no-fill): --finished jobs run to the end through the store's
own claim and settle (one in 20 failing for good, with an error), spread over four queues and
three tasks, then --waiting jobs left waiting. On PostgreSQL it then runs VACUUM (ANALYZE) on the
store's tables, as autovacuum would (it is on by default, and `tinyjobs check` fails where it is
off); --no-vacuum measures the dead rows of the fill as they are. Targets (issue 16): 150 ms p95 for pages and
/api/, 250 ms for /metrics, with 10^6 finished and 10^5 waiting jobs."""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUEUES = ("mail", "reports", "billing", "default")
TASKS = ("send", "render", "charge")
BATCH = 1000


def fill(app: Any, finished: int, waiting: int) -> None:
    from tinyjobs.holder import Holder
    from tinyjobs.stores.base import QueuePolicy, Settlement

    store, holder = app.store, Holder.current()
    policies = {q: QueuePolicy(q) for q in QUEUES}
    started, done = time.monotonic(), 0
    while done < finished:
        n = min(BATCH, finished - done)
        items = [
            (TASKS[(done + i) % 3], {"n": done + i, "to": f"user{done + i}@example.com"}) for i in range(n)
        ]
        for queue in QUEUES:
            chunk = [item for j, item in enumerate(items) if QUEUES[j % 4] == queue]
            if chunk:
                app.enqueue_many(chunk, queue=queue)
        claimed = []
        while len(claimed) < n:
            got = store.claim(policies, holder, n - len(claimed))
            if not got:
                break
            claimed += got
        store.settle(
            [
                Settlement(c.job.id, c.token, "fail", error=f"RuntimeError: card {c.job.args['n']} declined")
                if c.job.args["n"] % 20 == 0
                else Settlement(c.job.id, c.token, "done", result="null")
                for c in claimed
            ]
        )
        done += n
        if done % 50_000 < BATCH:
            print(f"  finished {done:,} ({done / (time.monotonic() - started):,.0f}/s)", flush=True)
    for start in range(0, waiting, BATCH):
        n = min(BATCH, waiting - start)
        later = [("send", {"n": start + i, "to": "later@example.com"}) for i in range(n)]
        app.enqueue_many(later, queue="mail", delay=3600 if start % 2 else 0)
    print(f"filled in {time.monotonic() - started:.0f} s", flush=True)


def call(dash: Any, path: str) -> tuple[int, float]:
    path, _, query = path.partition("?")
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "bench",
        "SERVER_PORT": "80",
        "HTTP_HOST": "bench",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
    }
    status: list[int] = []
    began = time.perf_counter()
    b"".join(dash(environ, lambda s, h: status.append(int(s[:3]))))
    return status[0], (time.perf_counter() - began) * 1000


def vacuum(store: Any) -> None:
    """VACUUM (ANALYZE) every table of the PostgreSQL store's schema (outside a transaction, as
    VACUUM must be): what autovacuum does after a fill this size."""
    import psycopg
    from psycopg import sql

    started = time.monotonic()
    with psycopg.connect(store.settings.conninfo, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (store.schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(store.schema, table)))
    print(f"vacuumed {len(tables)} tables in {time.monotonic() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-dashboard.db")
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--waiting", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--no-fill", action="store_true", help="Measure the store as it is.")
    parser.add_argument(
        "--no-vacuum", action="store_true", help="PostgreSQL: leave the fill's dead rows unvacuumed."
    )
    args = parser.parse_args()

    import tinyjobs
    from tinyjobs.dashboard import make_app
    from tinyjobs.stores.base import JobFilter
    from tinyjobs.urls import mask

    app = tinyjobs.App(args.url)
    print(f"store {mask(args.url)}")
    if not args.no_fill:
        fill(app, args.finished, args.waiting)
    if args.url.startswith(("postgresql:", "postgres:")) and not args.no_vacuum:
        vacuum(app.store)
    dash = make_app(app)
    some = app.store.browse(JobFilter(), limit=50)
    job_id = some[0][-1].id if some[0] else "none"
    failed = app.store.browse(JobFilter(state="failed"), limit=1)[0]
    cursor = some[1] or ""
    paths = [
        "/",
        "/jobs",
        "/jobs?state=failed",
        "/jobs?queue=billing&task=charge",
        f"/jobs?q={job_id[:10]}",
        "/jobs?q=declined",
        f"/jobs/{failed[0].id if failed else job_id}",
        "/queues",
        "/workers",
        "/cron",
        "/api/stats",
        "/api/jobs",
        f"/api/jobs?cursor={cursor}",
        "/api/jobs?state=done&queue=mail",
        f"/api/jobs/{job_id}",
        "/api/queues",
        "/api/workers",
        "/metrics",
    ]
    print(f"{'path':40} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
    for path in paths:
        _, first = call(dash, path)  # the first: caches of the store and the OS are cold
        times = []
        for _ in range(args.requests):
            status, ms = call(dash, path)
            assert status == 200, (path, status)
            times.append(ms)
        times.sort()
        p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
        print(f"{path[:40]:40} {first:9.1f} {statistics.median(times):8.1f} {p95:8.1f}", flush=True)
    app.close()


if __name__ == "__main__":
    main()
