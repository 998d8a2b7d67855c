"""Client CPU per job of building and adding jobs: `App.new_jobs` alone (no store), then
the single enqueue's client path alone (a store that only builds the snapshot), then
`Task.enqueue_many` of 1,000 and single `Task.enqueue` on the memory, SQLite, PostgreSQL and
Redis stores (those whose URL is given), in process CPU time (time.process_time), best and
median of --rounds.

    python benchmarks/enqueue_cpu.py [--pg postgresql://...] [--redis redis://...] [--rounds 5]

The job is the peers harness's: a task `noop(run, i, t)` given `i=<int>, t=<float>`. CPU, not
wall time: what the client pays per job, whatever the store's server does meanwhile."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence

import tinyjobs
from tinyjobs.job import Job
from tinyjobs.stores.base import NewJob
from tinyjobs.stores.rules import created_snapshot


def cpu_per_job(fn: Callable[[], int], rounds: int) -> tuple[float, float]:
    """(best, median) µs of process CPU per job over `rounds` calls of fn (returning its jobs)."""
    seen = []
    for _ in range(rounds):
        t0 = time.process_time()
        n = fn()
        seen.append((time.process_time() - t0) / n * 1e6)
    return min(seen), statistics.median(seen)


def make_app(url: str | None) -> tuple[tinyjobs.App, object]:
    app = tinyjobs.App(url or "memory://")

    @app.task
    def noop(run, i, t):
        return None

    return app, noop


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg", default=os.environ.get("TINYJOBS_BENCH_PG"))
    ap.add_argument("--redis", default=os.environ.get("TINYJOBS_BENCH_REDIS"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10, help="enqueue_many calls of 1,000 a round")
    ap.add_argument("--singles", type=int, default=2000, help="single enqueues a round")
    ap.add_argument("--only", default="", help="comma-separated figures to run (new_jobs,client,memory,...)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))

    app, noop = make_app(None)
    items = [("noop", {"i": i, "t": 0.0}) for i in range(1000)]

    def build() -> int:
        for _ in range(args.calls):
            app.new_jobs(items, {})
        return 1000 * args.calls

    if not only or "new_jobs" in only:
        best, med = cpu_per_job(build, args.rounds)
        print(f"new_jobs (1,000 a call, no store)        best {best:6.2f}  median {med:6.2f} µs/job")

    if not only or "client" in only:
        best, med = cpu_per_job(client_path(args.singles * 10), args.rounds)
        print(f"single enqueue, client path only         best {best:6.2f}  median {med:6.2f} µs/job")

    tmp = tempfile.mkdtemp()
    stores = {"memory": "memory://", "sqlite": f"sqlite:///{tmp}/bench.db"}
    if args.pg:
        stores["postgres"] = args.pg
    if args.redis:
        stores["redis"] = args.redis
    for label, url in stores.items():
        if only and label not in only:
            continue
        bulk_best, bulk_median, one_best, one_median = measure_store(url, args)
        print(
            f"{label:8s} enqueue_many(1000) best {bulk_best:6.2f} median {bulk_median:6.2f}   "
            f"enqueue best {one_best:7.1f} median {one_median:7.1f} µs/job"
        )


class SnapshotStore:
    """A store whose enqueue only builds the snapshot every store returns for a job it added
    (rules.created_snapshot): what a single enqueue costs the client before any store's own
    work (Task.enqueue, App, the NewJob, its JSON, its id, the snapshot)."""

    url = "snapshot://"

    def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: object = None) -> list[Job]:
        return [created_snapshot(job, 0.0, 0.0) for job in jobs]

    def now(self) -> float:
        return time.time()

    def close(self) -> None:
        pass


def client_path(n: int) -> Callable[[], int]:
    """`n` single enqueues (Task.enqueue) on a SnapshotStore."""
    app = tinyjobs.App(SnapshotStore())  # type: ignore[arg-type]

    @app.task
    def noop(run, i, t):
        return None

    def run() -> int:
        for i in range(n):
            noop.enqueue(i=i, t=1764700000.123456)
        return n

    return run


def measure_store(url: str, args: argparse.Namespace) -> tuple[float, float, float, float]:
    """(best, median) µs per job of enqueue_many(1,000), then of single enqueues, on `url`."""
    app, noop = make_app(url)
    app.store  # noqa: B018 (open and migrate outside the timing)
    batch = [{"i": i, "t": 0.0} for i in range(1000)]

    def bulk() -> int:
        for _ in range(args.calls):
            noop.enqueue_many(batch)
        return 1000 * args.calls

    def single() -> int:
        for i in range(args.singles):
            noop.enqueue(i=i, t=0.0)
        return args.singles

    noop.enqueue_many(batch[:20])  # warm: connections, prepared statements
    noop.enqueue(i=0, t=0.0)
    try:
        return (*cpu_per_job(bulk, args.rounds), *cpu_per_job(single, args.rounds))
    finally:
        app.close()


if __name__ == "__main__":
    main()
