"""The store alone: how many jobs a second its worker cycle (settle_and_claim) moves, with no
worker around it. Compare with benchmarks/run.py's drain to see what the worker costs.

    python benchmarks/store_cycle.py --url sqlite:////tmp/cycle.db
    python benchmarks/store_cycle.py --url "postgresql://postgres@127.0.0.1/test?schema=cycle"
    python benchmarks/store_cycle.py --url redis://127.0.0.1:6379/9 --processes 2 --batch 8

Each of --processes processes claims --batch jobs, then settles them as done while claiming the
next batch in the same call, until --jobs no-op jobs (enqueued first with enqueue_many) are
done. The store must hold no other jobs of the queue `cycle`."""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUEUE = "cycle"


def cycle(url: str, batch: int, start: multiprocessing.Event, done: multiprocessing.Value) -> None:
    """Claim and settle until nothing is left; add the jobs this process finished to `done`."""
    from tinyjobs.holder import Holder
    from tinyjobs.stores import open_store
    from tinyjobs.stores.base import QueuePolicy, Settlement

    store = open_store(url)
    policies = {QUEUE: QueuePolicy(name=QUEUE)}
    holder = Holder.current()
    start.wait()
    finished = 0
    _, claimed = store.settle_and_claim([], policies, holder, batch)
    while claimed:
        settlements = [Settlement(job_id=c.job.id, token=c.token, outcome="done") for c in claimed]
        applied, claimed = store.settle_and_claim(settlements, policies, holder, batch)
        finished += sum(applied)
    with done.get_lock():
        done.value += finished
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-cycle.db")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()

    import tinyjobs
    from tinyjobs.urls import mask

    app = tinyjobs.App(args.url)
    app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)
    names = [("noop", {"n": i}) for i in range(args.jobs)]
    for i in range(0, len(names), 1000):
        app.enqueue_many(names[i : i + 1000], queue=QUEUE)

    ctx = multiprocessing.get_context("spawn")  # no connection crosses a fork
    start, done = ctx.Event(), ctx.Value("q", 0)
    procs = [
        ctx.Process(target=cycle, args=(args.url, args.batch, start, done)) for _ in range(args.processes)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let every process open its store before the clock starts
    began = time.perf_counter()
    start.set()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - began
    print(
        f"store {mask(args.url)}; {args.processes} processes, batch {args.batch}: "
        f"{done.value:,} jobs in {elapsed:.2f} s = {done.value / elapsed:,.0f} jobs/s"
    )
    app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)


if __name__ == "__main__":
    main()
