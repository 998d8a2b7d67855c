"""Throughput and latency of tinyjobs on one store, with real worker processes.

    python benchmarks/run.py --url sqlite:////tmp/bench.db
    python benchmarks/run.py --url "postgresql://postgres@127.0.0.1/test?schema=bench_$(date +%s)"
    python benchmarks/run.py --url redis://127.0.0.1:6379/9

Measures: single enqueue rate, enqueue_many rate, the drain rate of --jobs no-op jobs with
--workers worker processes, and start latency (enqueue -> handler start) p50/p95 at a steady
--rate jobs a second. The store must hold no other jobs: the benchmark empties it first by
purging (SQLite: a fresh file is simplest; PostgreSQL: a fresh schema, as a reused one carries
the dead rows of earlier runs until autovacuum clears them, and never where it is off)."""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def start_workers(url: str, count: int, slots: int, log_level: str) -> list[subprocess.Popen]:
    env = {
        **os.environ,
        "TINYJOBS_URL": url,
        "TINYJOBS_LOG_LEVEL": log_level,
        "PYTHONPATH": str(ROOT),
    }
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tinyjobs",
                "worker",
                "--app",
                "benchmarks.app:app",
                "--slots",
                str(slots),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
        )
        for _ in range(count)
    ]


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        w.wait(timeout=60)


def wait_done(app, total: int, timeout: float = 300.0) -> None:
    """Return once `total` jobs are done. counts() reads the whole table (on PostgreSQL a scan
    of every row version), so it is asked rarely: the drain's end is read from the jobs'
    own finish times (see drain_end), not from when this loop noticed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = app.store.counts()
        done = sum(states.get("done", 0) for states in counts.values())
        if done >= total:
            return
        time.sleep(0.25)
    raise SystemExit(f"not done within {timeout} s: {app.store.counts()}")


def drain_end(app, last: list[str]) -> float:
    """When the drain ended, in epoch seconds: the latest finish time among the last jobs
    enqueued (claims go oldest first, so the last of them to finish ends the drain)."""
    return max(app.get(job_id).finished_at for job_id in last)


def bench_enqueue(app, noop, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        noop.enqueue(n=i)
    return n / (time.perf_counter() - start)


def bench_enqueue_many(app, noop, n: int, batch: int = 1000, added: list | None = None) -> float:
    """Jobs a second added by enqueue_many; their Jobs are appended to `added` when given."""
    start = time.perf_counter()
    for base in range(0, n, batch):
        jobs = noop.enqueue_many([{"n": i} for i in range(base, min(n, base + batch))])
        if added is not None:
            added.extend(jobs)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-bench.db")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--latency-jobs", type=int, default=500)
    parser.add_argument(
        "--log-level", default="info", help="the workers' log level (info logs every transition)"
    )
    args = parser.parse_args()

    os.environ["TINYJOBS_URL"] = args.url
    from benchmarks.app import app, noop, stamp
    from tinyjobs.urls import mask

    app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)
    print(f"store {mask(args.url)}; workers {args.workers} x {args.slots} slots; log level {args.log_level}")

    print(f"enqueue, one at a time:   {bench_enqueue(app, noop, 2000):>10,.0f} jobs/s")
    print(f"enqueue_many (1000/call): {bench_enqueue_many(app, noop, 20_000):>10,.0f} jobs/s")
    workers = start_workers(args.url, args.workers, args.slots, args.log_level)
    try:
        wait_done(app, 22_000)  # drain what the enqueue benchmarks left, warming the workers
        app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)
        start, added = time.time(), []
        bench_enqueue_many(app, noop, args.jobs, added=added)
        wait_done(app, args.jobs)
        end = drain_end(app, [job.id for job in added[-4 * args.slots * args.workers :]])
        print(
            f"drain {args.jobs:,} no-op jobs:  {args.jobs / (end - start):>10,.0f} jobs/s (enqueue included)"
        )

        app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)
        jobs = []
        interval, next_at = 1.0 / args.rate, time.monotonic()
        for _ in range(args.latency_jobs):
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))
            sent = time.time()
            job_id = stamp.enqueue(sent=sent).id
            jobs.append((sent, time.time(), job_id))
        wait_done(app, args.latency_jobs)
        started = {job_id: app.get(job_id).result for _, _, job_id in jobs}
        for label, index in (("from the enqueue call", 0), ("from its acknowledgement", 1)):
            ms = sorted((started[job[2]] - job[index]) * 1000 for job in jobs)
            p50, p95 = statistics.median(ms), ms[int(len(ms) * 0.95) - 1]
            worst = ms[-1]
            print(f"start latency {label}: p50 {p50:.2f} ms, p95 {p95:.2f} ms, max {worst:.2f} ms")
    finally:
        stop_workers(workers)


if __name__ == "__main__":
    main()
