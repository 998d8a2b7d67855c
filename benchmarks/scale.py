"""How each store's cost grows with the jobs it holds: fill it to 10^4, 10^5 and 10^6 jobs and
measure the same operations at each size.

    pip install -e '.[bench]'                       # matplotlib, for --plot only
    python benchmarks/scale.py --stores memory,sqlite --sizes 10000,100000 --out /tmp/scale.jsonl
    python benchmarks/scale.py --stores postgres --postgres "postgresql://postgres@127.0.0.1/bench?schema=scale"
    python benchmarks/scale.py --stores redis --redis "redis://127.0.0.1:6399/0?prefix=scale"
    python benchmarks/scale.py --stores none --out /tmp/scale.jsonl --table --plot docs/scale.png

The store is emptied first (SQLite: the file is removed; PostgreSQL: the URL's schema is dropped;
Redis: the prefix's keys are deleted), then filled incrementally through the Store API: chunks of
1,000 jobs enqueued in one call, 90 % of each chunk claimed in one call and settled in one call,
so that the store holds 85 % done, 5 % failed (one execution each), 5 % scheduled (due in a day)
and 5 % waiting jobs, all in the queue `default`. At each size (the fill goes on from the last
one) it measures, in this order:

Besides wall-clock figures, each operation's CPU (`*_cpu_us`: this process's plus the store
server's: PostgreSQL's backends of the database, read from /proc, so run it on the server's
machine; Redis's INFO cpu, the whole server's) is recorded: on a shared machine it is the figure
to compare sizes by.

- size: the store's bytes per job (SQLite: used pages; PostgreSQL: pg_total_relation_size of its
  tables; Redis: used_memory over the server's before the fill, so use a Redis of your own;
  memory: the resident set's growth).
- enqueue: 200 single-job enqueues (waiting), latency p50 and p99.
- cycle: 1,000 waiting jobs are added, then the worker's cycle (settle_and_claim, 10 at a time)
  claims and settles 1,000 of the waiting jobs (the oldest first): jobs per second and the
  cycle's p50 latency.
- get: p50 of `get` of done jobs and of waiting jobs (at the back of the queue, so `ahead` counts
  every waiting job; that count is meant to grow with the waiting jobs, not with the finished).
- jobs: p50 of `jobs(state=...)` pages of 100 for waiting, done (oldest first) and done (newest).
- counts: p50 of `counts()`.
- purge: 1,000 jobs of the queue `purge` are run with a dedupe window of 0 s, then removed by
  purge(limit=100) calls: jobs per second; and the latency of a purge that finds nothing.

Each size is one JSON line on --out (appended) and stdout. Run one store at a time on a shared
machine; --plot draws every line of --out (the last per store and size), so several runs, one per
store, make one plot. Wall-clock figures: compare sizes within one run, not across runs. 10^6
takes a few minutes per store (the fill dominates)."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tinyjobs.holder import Holder  # noqa: E402
from tinyjobs.stores import open_store  # noqa: E402
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement, Store  # noqa: E402

STORES = ("memory", "sqlite", "postgres", "redis")
CHUNK = 1000
DAY = 86400.0
QUEUE = "default"
PURGE_QUEUE = "purge"
POLICIES = {QUEUE: QueuePolicy(name=QUEUE)}
PURGE_POLICIES = {PURGE_QUEUE: QueuePolicy(name=PURGE_QUEUE)}
PAYLOAD = '{"user_id": %d, "email": "user%d@example.com", "plan": "pro"}'
RESULT = '{"sent": true}'


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(call: Callable[[], Any], times: int) -> list[float]:
    """Latencies of `times` calls, in seconds."""
    out = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


class Filler:
    """Fills one store chunk by chunk, keeping a sample of the ids of its done jobs."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.holder = Holder.current()
        self.count = 0  # jobs on record (the measurements' own jobs included)
        self.seq = 0
        self.done_sample: list[str] = []

    def new_id(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq:08d}"

    def chunk(self, n: int) -> None:
        """n jobs: 5 % scheduled, the rest due now; 90 % of n claimed, 85 % done, 5 % failed."""
        jobs = []
        for i in range(n):
            seq = self.seq + 1
            jobs.append(
                NewJob(
                    id=self.new_id("f"),
                    task="scale.send",
                    queue=QUEUE,
                    payload=PAYLOAD % (seq, seq),
                    delay=DAY if i % 20 == 19 else 0.0,
                )
            )
        self.store.enqueue(jobs)
        claimed = self.store.claim(POLICIES, self.holder, n * 9 // 10)
        failed = n // 20
        settlements = [
            Settlement(c.job.id, c.token, "fail", error="boom: the mail server said no")
            if k < failed
            else Settlement(c.job.id, c.token, "done", result=RESULT)
            for k, c in enumerate(claimed)
        ]
        self.store.settle(settlements)
        self.done_sample.extend(c.job.id for c in claimed[failed::50])
        self.count += n

    def fill(self, to: int) -> float:
        """Fill up to `to` jobs; the fill's jobs per second."""
        start, before = time.perf_counter(), self.count
        while self.count < to:
            self.chunk(min(CHUNK, to - self.count))
        elapsed = time.perf_counter() - start
        return (self.count - before) / elapsed if elapsed > 0 else 0.0


def measure(filler: Filler, size_of: Callable[[], int], server_cpu: Callable[[], float]) -> dict[str, Any]:
    """One size's figures: wall-clock p50s (ms) and, as `*_cpu_us`, the CPU per call or job of
    this process and the store's server together, which a busy machine disturbs far less."""
    store, holder = filler.store, filler.holder
    out: dict[str, Any] = {}
    out["bytes_per_job"] = round(size_of() / filler.count, 1)

    def cpu() -> float:
        return time.process_time() + server_cpu()

    def op(name: str, call: Callable[[], Any], times: int) -> None:
        before = cpu()
        lat = timed(call, times)
        out[f"{name}_cpu_us"] = (cpu() - before) / times * 1e6
        out[f"{name}_p50_ms"] = percentile(lat, 0.5) * 1e3
        if name == "enqueue":
            out["enqueue_p99_ms"] = percentile(lat, 0.99) * 1e3

    # enqueue: single jobs, each its own call (waiting, at the back of the queue).
    def enqueue_one() -> None:
        store.enqueue(
            [NewJob(id=filler.new_id("e"), task="scale.send", queue=QUEUE, payload=PAYLOAD % (1, 1))]
        )

    op("enqueue", enqueue_one, 200)
    filler.count += 200

    # the worker's cycle on a fixed batch of 1,000 waiting jobs
    batch = [
        NewJob(id=filler.new_id("c"), task="scale.send", queue=QUEUE, payload=PAYLOAD % (2, 2))
        for _ in range(CHUNK)
    ]
    store.enqueue(batch)
    filler.count += CHUNK
    cycles: list[float] = []
    settled = 0
    start, before = time.perf_counter(), cpu()
    _, claimed = store.settle_and_claim([], POLICIES, holder, 10)
    while claimed:
        settlements = [Settlement(c.job.id, c.token, "done", result=RESULT) for c in claimed]
        settled += len(settlements)
        t0 = time.perf_counter()
        _, claimed = store.settle_and_claim(settlements, POLICIES, holder, min(10, CHUNK - settled))
        cycles.append(time.perf_counter() - t0)
    out["cycle_jobs_per_s"] = settled / (time.perf_counter() - start)
    out["cycle_cpu_us"] = (cpu() - before) / settled * 1e6  # per job
    out["cycle_p50_ms"] = percentile(cycles, 0.5) * 1e3

    # reads
    rng = random.Random(7)
    done_ids = rng.sample(filler.done_sample, min(100, len(filler.done_sample)))
    op("get_done", lambda: store.get(done_ids.pop()), len(done_ids))
    back = [job.id for job in batch[-100:]]  # still waiting, at the back of the queue
    op("get_waiting", lambda: store.get(back.pop()), len(back))
    op("jobs_waiting", lambda: store.jobs("waiting", limit=100), 20)
    op("jobs_done", lambda: store.jobs("done", limit=100), 20)
    op("jobs_done_newest", lambda: store.jobs("done", limit=100, newest=True), 20)
    op("counts", store.counts, 5)

    # purge: 1,000 finished jobs past their window among `count` that are not
    store.enqueue(
        [
            NewJob(id=filler.new_id("p"), task="scale.send", queue=PURGE_QUEUE, dedupe=0.0, keep=0.0)
            for _ in range(CHUNK)
        ]
    )
    claimed = store.claim(PURGE_POLICIES, holder, CHUNK)
    store.settle([Settlement(c.job.id, c.token, "done") for c in claimed])
    time.sleep(0.01)  # past the window on the store's clock
    purged = 0
    start, before = time.perf_counter(), cpu()
    while n := store.purge(limit=100):
        purged += n
    out["purge_jobs_per_s"] = purged / (time.perf_counter() - start)
    out["purge_cpu_us"] = (cpu() - before) / max(1, purged) * 1e6  # per job
    out["purged"] = purged
    op("purge_empty", lambda: store.purge(limit=100), 5)
    out["jobs"] = filler.count
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


# -- the stores: open empty, and how big they are ------------------------------------------------


Opened = tuple[Store, Callable[[], int], Callable[[], float]]  # store, bytes, server CPU seconds


def no_server() -> float:
    return 0.0


def open_memory(args: argparse.Namespace) -> Opened:
    base = _rss()
    return open_store("memory://"), lambda: _rss() - base, no_server


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def open_sqlite(args: argparse.Namespace) -> Opened:
    import sqlite3

    path = Path(args.sqlite)
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    store = open_store(f"sqlite:///{path}")

    def size() -> int:
        with sqlite3.connect(path) as db:  # the pages in use, the WAL's newer copies included
            used = (
                db.execute("PRAGMA page_count").fetchone()[0]
                - db.execute("PRAGMA freelist_count").fetchone()[0]
            )
            return int(used * db.execute("PRAGMA page_size").fetchone()[0])

    return store, size, no_server


def open_postgres(args: argparse.Namespace) -> Opened:
    import psycopg

    from tinyjobs.stores.postgres.config import parse

    config = parse(args.postgres)
    with psycopg.connect(config.conninfo, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {config.schema} CASCADE")
    store = open_store(args.postgres)

    def size() -> int:
        with psycopg.connect(config.conninfo, autocommit=True) as db:
            db.execute("VACUUM ANALYZE")  # settled rows' dead versions are not the job's size
            row = db.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (config.schema,),
            ).fetchone()
            return int(row[0] if row else 0)

    # The server's CPU: the backends of the store's database (this machine's, read from /proc),
    # summed as increments per backend, so that a backend that exits takes nothing back (the
    # last slice of a backend that exits between two readings, a parallel worker's, is missed).
    monitor = psycopg.connect(config.conninfo, autocommit=True)
    seen: dict[int, float] = {}
    total = [0.0]

    def server_cpu() -> float:
        pids = monitor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        for (pid,) in pids:
            now = _proc_cpu(pid)
            total[0] += max(0.0, now - seen.get(pid, 0.0))
            seen[pid] = now
        return total[0]

    return store, size, server_cpu


def _proc_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_redis(args: argparse.Namespace) -> Opened:
    import redis

    from tinyjobs.stores.redis.connection import parse

    client_url, prefix, options = parse(args.redis, {})
    client = redis.Redis.from_url(client_url, **options)
    batch = list(client.scan_iter(match=f"{prefix}*", count=10_000))
    while batch:
        client.unlink(*batch[:10_000])
        batch = batch[10_000:] or list(client.scan_iter(match=f"{prefix}*", count=10_000))
    base = int(client.info("memory")["used_memory"])

    def server_cpu() -> float:  # the whole server's: exact only on a Redis of your own
        info = client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    return open_store(args.redis), lambda: int(client.info("memory")["used_memory"]) - base, server_cpu


OPENERS = {"memory": open_memory, "sqlite": open_sqlite, "postgres": open_postgres, "redis": open_redis}


def run(name: str, sizes: list[int], args: argparse.Namespace) -> None:
    store, size_of, server_cpu = OPENERS[name](args)
    filler = Filler(store)
    try:
        for target in sizes:
            fill_rate = filler.fill(target)
            record = {"store": name, "size": target, "fill_jobs_per_s": round(fill_rate, 1)}
            record.update(measure(filler, size_of, server_cpu))
            line = json.dumps(record)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as handle:
                    handle.write(line + "\n")
    finally:
        store.close()


# -- the plot ------------------------------------------------------------------------------------

PANELS = (
    ("cycle_jobs_per_s", "claim + settle (jobs/s)"),
    ("cycle_cpu_us", "claim + settle, CPU per job (µs)"),
    ("purge_jobs_per_s", "purge (jobs/s)"),
    ("enqueue_p50_ms", "single enqueue p50 (ms)"),
    ("get_waiting_p50_ms", "get, waiting job p50 (ms)"),
    ("jobs_waiting_p50_ms", "jobs(waiting) p50 (ms)"),
    ("jobs_done_newest_p50_ms", "jobs(done, newest) p50 (ms)"),
    ("counts_p50_ms", "counts() p50 (ms)"),
)


def plot(records: list[dict[str, Any]], target: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    last: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        last[(record["store"], record["size"])] = record
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.5))
    for ax, (field, title) in zip(axes.flat, PANELS, strict=True):
        for store in STORES:
            points = sorted((size, r[field]) for (s, size), r in last.items() if s == store and field in r)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=store)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("jobs in the store")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend()
    fig.suptitle("tinyjobs: cost against store size (benchmarks/scale.py)")
    fig.tight_layout()
    fig.savefig(target, dpi=90)


TABLE = (
    ("bytes_per_job", "bytes/job", "{:.0f}"),
    ("cycle_jobs_per_s", "claim+settle jobs/s", "{:,.0f}"),
    ("cycle_cpu_us", "claim+settle CPU µs/job", "{:,.0f}"),
    ("enqueue_p50_ms", "enqueue p50 / p99 ms", "{:.2f}"),
    ("get_done_p50_ms", "get (done) ms", "{:.2f}"),
    ("get_waiting_p50_ms", "get (waiting, ahead) ms", "{:.2f}"),
    ("jobs_waiting_p50_ms", "jobs(waiting) ms", "{:.1f}"),
    ("jobs_done_p50_ms", "jobs(done) ms", "{:.1f}"),
    ("jobs_done_newest_p50_ms", "jobs(done, newest) ms", "{:.1f}"),
    ("counts_p50_ms", "counts ms", "{:.1f}"),
    ("purge_jobs_per_s", "purge jobs/s", "{:,.0f}"),
    ("purge_empty_p50_ms", "purge, nothing due, ms", "{:.2f}"),
)


def table(records: list[dict[str, Any]]) -> str:
    """A markdown table per store: one row per figure (wall-clock p50s, but the CPU row), one
    column per size."""
    last: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        last[(record["store"], record["size"])] = record
    out = []
    for store in STORES:
        sizes = sorted(size for s, size in last if s == store)
        if not sizes:
            continue
        out.append(f"| {store} | " + " | ".join(f"{size:,}" for size in sizes) + " |")
        out.append("| --- |" + " --- |" * len(sizes))
        for field, title, fmt in TABLE:
            cells = []
            for size in sizes:
                record = last[(store, size)]
                cell = fmt.format(record[field]) if field in record else ""
                if field == "enqueue_p50_ms" and "enqueue_p99_ms" in record:
                    cell += " / " + fmt.format(record["enqueue_p99_ms"])
                cells.append(cell)
            out.append(f"| {title} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", default="memory,sqlite", help="comma-separated, of " + ", ".join(STORES))
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--out", help="append one JSON line per store and size to this file")
    parser.add_argument("--plot", help="write a PNG of every record in --out to this path")
    parser.add_argument("--table", action="store_true", help="print the records of --out as markdown")
    parser.add_argument(
        "--sqlite", default="/tmp/tinyjobs-scale/scale.db", help="the SQLite file (removed first)"
    )
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432/bench_scale?schema=scale",
        help="its schema is dropped first",
    )
    parser.add_argument(
        "--redis",
        default="redis://127.0.0.1:6379/5?prefix=tjscale",
        help="its prefix's keys are deleted first",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    stores = [] if args.stores == "none" else args.stores.split(",")
    for name in stores:
        if name not in OPENERS:
            parser.error(f"unknown store {name!r}: one of {', '.join(STORES)}")
        run(name, sizes, args)
    if args.plot or args.table:
        if not args.out:
            parser.error("--plot and --table read the records of --out")
        with open(args.out) as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        if args.plot:
            plot(records, args.plot)
        if args.table:
            print(table(records))


if __name__ == "__main__":
    main()
