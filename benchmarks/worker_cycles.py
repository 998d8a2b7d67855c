"""A drain through real worker processes, counted in store cycles: how many claiming store
calls (claim, settle_and_claim) the workers made for --jobs no-op jobs and how many jobs each
took, with the drain's rate and the workers' CPU per job. The cycle count is what a flush-bound
store pays per call (on PostgreSQL one WAL flush, on SQLite one fsync), and does not depend on
how loaded the machine is; the rate does.

    python benchmarks/worker_cycles.py --url "postgresql://postgres@127.0.0.1/test?schema=wc_$(date +%s)"
    python benchmarks/worker_cycles.py --url sqlite:////tmp/wc.db

Each worker process runs tinyjobs.worker.Worker on benchmarks/app.py's app with its store's
claiming calls wrapped to count them; it writes its counts to a file when it stops."""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def work(out: str, slots: int) -> None:
    """(A worker process.) Run a Worker, counting the store's claiming calls; write the counts."""
    from benchmarks.app import app
    from tinyjobs.worker import Worker

    store = app.store
    counts = {"calls": 0, "claimed": 0, "settled": 0}

    def counted(fn):
        def call(*args, **kwargs):
            result = fn(*args, **kwargs)
            claimed = result[1] if isinstance(result, tuple) else result
            counts["calls"] += 1
            counts["claimed"] += len(claimed)
            counts["settled"] += len(args[0]) if isinstance(result, tuple) else 0
            return result

        return call

    store.settle_and_claim = counted(store.settle_and_claim)
    store.claim = counted(store.claim)
    Worker(app, slots=slots).run()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    counts["cpu"] = usage.ru_utime + usage.ru_stime
    Path(out).write_text(json.dumps(counts))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["TINYJOBS_URL"] = args.url
    if args.work:
        work(args.work, args.slots)
        return
    from benchmarks.app import app, noop

    app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)
    added = []
    for base in range(0, args.jobs, 1000):
        added += noop.enqueue_many([{"n": i} for i in range(base, min(args.jobs, base + 1000))])
    tmp = Path(tempfile.mkdtemp())
    env = {**os.environ, "TINYJOBS_LOG_LEVEL": "info", "PYTHONPATH": str(ROOT)}
    start = time.time()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--url",
                args.url,
                "--slots",
                str(args.slots),
                "--work",
                str(tmp / f"{i}.json"),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
        )
        for i in range(args.workers)
    ]
    try:
        while True:
            counts = app.store.counts()
            if sum(states.get("done", 0) for states in counts.values()) >= args.jobs:
                break
            time.sleep(0.25)
        end = max(app.get(job.id).finished_at for job in added[-4 * args.slots * args.workers :])
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
    totals = {"calls": 0, "claimed": 0, "settled": 0, "cpu": 0.0}
    for i in range(args.workers):
        for key, value in json.loads((tmp / f"{i}.json").read_text()).items():
            totals[key] += value
    print(
        f"drain {args.jobs:,}: {args.jobs / (end - start):,.0f} jobs/s; claiming calls {totals['calls']:,} "
        f"({totals['claimed'] / max(1, totals['calls']):.1f} jobs claimed a call); "
        f"worker CPU {totals['cpu'] / args.jobs * 1e6:.0f} µs/job (start-up included)"
    )


if __name__ == "__main__":
    main()
