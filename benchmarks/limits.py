"""What a limit costs the claim: the drain rate of --jobs no-op jobs with --workers worker
processes, on a queue without limits and on one with `concurrency=--concurrency`.

    python benchmarks/limits.py --url sqlite:////tmp/tinyjobs-limits.db
    python benchmarks/limits.py --url postgresql://postgres@127.0.0.1/test --jobs 20000
    python benchmarks/limits.py --url redis://127.0.0.1:6379/9 --concurrency 4

The workers start first and warm up on a few jobs; each phase then enqueues its jobs in
batches and times until every one is done (enqueue included). The store must hold no other
jobs (SQLite: a fresh file is simplest). This module is also the workers' app
(`benchmarks.limits:app`); the limit comes from $TJ_BENCH_CONCURRENCY."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tinyjobs  # noqa: E402  (after the path, so that the benchmark runs from a checkout)

app = tinyjobs.App()  # $TINYJOBS_URL
app.queue("free")
app.queue("capped", concurrency=int(os.environ.get("TJ_BENCH_CONCURRENCY", "8")))


@app.task(queue="free")
def free(run: tinyjobs.Run, n: int) -> None:
    return None


@app.task(queue="capped")
def capped(run: tinyjobs.Run, n: int) -> None:
    return None


def start_workers(args: argparse.Namespace) -> list[subprocess.Popen]:
    env = {
        **os.environ,
        "TINYJOBS_URL": args.url,
        "TINYJOBS_LOG_LEVEL": args.log_level,
        "TJ_BENCH_CONCURRENCY": str(args.concurrency),
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "tinyjobs", "worker", "--app", "benchmarks.limits:app"]
    command += ["--slots", str(args.slots)]
    return [
        subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=ROOT) for _ in range(args.workers)
    ]


def done(queue: str) -> int:
    return app.store.counts().get(queue, {}).get("done", 0)


def drain_rate(task: tinyjobs.Task, jobs: int, timeout: float = 600.0) -> float:
    """Enqueue `jobs` jobs of `task` in batches of 1000; jobs a second until all are done."""
    before = done(task.queue)
    start = time.monotonic()
    for base in range(0, jobs, 1000):
        task.enqueue_many([{"n": i} for i in range(base, min(jobs, base + 1000))])
    deadline = start + timeout
    while done(task.queue) < before + jobs:
        if time.monotonic() > deadline:
            raise SystemExit(f"not done within {timeout} s: {app.store.counts()}")
        time.sleep(0.01)
    return jobs / (time.monotonic() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-limits.db")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8, help="the capped queue's limit")
    parser.add_argument("--log-level", default="warning", help="the workers' log level")
    args = parser.parse_args()
    app.url, app._store = args.url, None
    from tinyjobs.urls import mask

    print(
        f"store {mask(args.url)}; {args.workers} workers x {args.slots} slots; "
        f"{args.jobs:,} no-op jobs per phase"
    )
    workers = start_workers(args)
    try:
        drain_rate(free, 200)  # warm-up: the workers are up and have claimed
        drain_rate(capped, 200)
        unlimited = drain_rate(free, args.jobs)
        limited = drain_rate(capped, args.jobs)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(60)
    print(f"drain, no limit:             {unlimited:>10,.0f} jobs/s")
    print(f"drain, concurrency={args.concurrency:<10}{limited:>10,.0f} jobs/s")
    print(f"limit cost:                  {100 * (1 - limited / unlimited):>9.0f} %")


if __name__ == "__main__":
    main()
