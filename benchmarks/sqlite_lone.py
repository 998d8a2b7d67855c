"""What a lone job costs the SQLite store's calls, as a worker's slot makes them at a low rate:
thread CPU per call of `wait`, `claim` and `settle_and_claim`, each run cold (the thread sleeps
between jobs, as a worker's does at 50 jobs a second).

    python benchmarks/sqlite_lone.py                      # 50 jobs/s for 400 jobs
    python benchmarks/sqlite_lone.py --rate 50 --jobs 600 --statements

A child process enqueues one no-op job every 1/--rate seconds (its own App, its own connection:
its commits reset this process's page cache, as an enqueuer's do a worker's). This process has
one thread that waits for the wake-up, claims (up to --limit, as a worker claims for its free
slots), and settles the job as done with settle_and_claim (whose claim finds nothing), measuring
time.thread_time() around each call. Medians and quartiles over the jobs after the first 20.
--statements also times each SQL statement's step (sqlite3 trace callback: the time between
one statement's start and the next's, on this thread's clock), so the claim's and the
settlement's shares can be told apart. Not a replacement for the peers harness or
benchmarks/low_rate.py (they run the real worker processes); a way to see the store's part."""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def enqueuer(path: str, rate: float, jobs: int, start: float) -> None:
    import tinyjobs

    app = tinyjobs.App(f"sqlite:///{path}")
    step = 1.0 / rate
    for i in range(jobs):
        delay = start + i * step - time.time()
        if delay > 0:
            time.sleep(delay)
        app.enqueue("noop", {"n": i})


def quart(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):7.1f} ({q[0]:.1f}-{q[2]:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--path", default="/tmp/tinyjobs-sqlite-lone.db")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--limit", type=int, default=8, help="the claims' limit (a worker's free slots)")
    parser.add_argument("--statements", action="store_true", help="time each statement too")
    args = parser.parse_args()

    import tinyjobs
    from tinyjobs.holder import Holder
    from tinyjobs.stores.base import QueuePolicy, Settlement

    for suffix in ("", "-wal", "-shm", "-wake-default", "-unlock"):
        Path(args.path + suffix).unlink(missing_ok=True)
    app = tinyjobs.App(f"sqlite:///{args.path}")
    store, holder = app.store, Holder.current()
    policies = {"default": QueuePolicy(name="default")}
    store.claim(policies, holder, 1)  # opens this thread's connection, sets the wait's baseline
    store.wait(["default"], 0.01)

    spans: dict[str, list[float]] = {}
    marks: list[tuple[str, float]] = []
    if args.statements:
        conn = store._pool.get()

        def traced(statement: str) -> None:
            marks.append((" ".join(statement.split())[:48], time.thread_time()))

        conn.set_trace_callback(traced)

    start = time.time() + 0.5
    child = multiprocessing.get_context("spawn").Process(
        target=enqueuer, args=(args.path, args.rate, args.jobs, start)
    )
    child.start()
    calls: dict[str, list[float]] = {"wait": [], "claim": [], "settle_and_claim": []}
    done = 0
    deadline = start + args.jobs / args.rate + 30
    while done < args.jobs and time.time() < deadline:
        t0 = time.thread_time()
        store.wait(["default"], 1.0)
        t1 = time.thread_time()
        marks.clear()
        taken = store.claim(policies, holder, args.limit)
        t2 = time.thread_time()
        claim_marks = list(marks)
        if not taken:
            continue
        marks.clear()
        settled = [Settlement(job.job.id, job.token, "done") for job in taken]
        store.settle_and_claim(settled, policies, holder, args.limit)
        t3 = time.thread_time()
        done += len(taken)
        if done <= 20 or len(taken) > 1:  # a late wake-up that found two: not a lone job
            continue
        calls["wait"].append((t1 - t0) * 1e6)
        calls["claim"].append((t2 - t1) * 1e6)
        calls["settle_and_claim"].append((t3 - t2) * 1e6)
        for name, seen, end in (("claim", claim_marks, t2), ("settle", list(marks), t3)):
            for i, (text, at) in enumerate(seen):
                until = seen[i + 1][1] if i + 1 < len(seen) else end
                spans.setdefault(f"{name}: {text}", []).append((until - at) * 1e6)
    child.join()
    print(f"{done} jobs at {args.rate:g}/s; thread CPU per call, us: median (quartiles)")
    for name, values in calls.items():
        print(f"  {name:<20} {quart(values)}")
    total = [sum(v) for v in zip(*calls.values(), strict=True)]
    print(f"  {'total':<20} {quart(total)}")
    if spans:
        print("per statement (until the next one starts; the last one until the call returns):")
        for name, values in spans.items():
            if len(values) >= len(total) // 2:
                print(f"  {name:<60} {quart(values)}")


if __name__ == "__main__":
    main()
