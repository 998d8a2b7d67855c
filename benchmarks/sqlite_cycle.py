"""The SQLite store's worker cycle alone, in this process: what one `settle_and_claim` of
--batch jobs costs, and which b-trees its commit writes.

    python benchmarks/sqlite_cycle.py --batch 8
    python benchmarks/sqlite_cycle.py --batch 1 --jobs 2000 --pages

A fresh file (--path) gets --jobs no-op jobs (enqueue_many, not measured); then the cycle runs
as a worker's does, settling the batch it holds as done and claiming the next one in the same
call, until none is left, and prints the process's CPU time per job. With --pages the WAL is
checkpointed away first and not again (wal_autocheckpoint=0), and each frame the cycle wrote is
put to the b-tree that owns its page (the dbstat table): frames per commit, per b-tree.

Deterministic instructions per job, free of the machine's load: run it under callgrind for two
sizes and take the difference (start-up and the fill cancel out but for the fill's own growth,
small beside the cycle; --fill-only runs the fill and not the cycle, to subtract it exactly):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python benchmarks/sqlite_cycle.py \\
        --batch 8 --jobs 3000   # "Collected" Ir, less the same at --jobs 1000, over 2000
"""

from __future__ import annotations

import argparse
import collections
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--path", default="/tmp/tinyjobs-sqlite-cycle.db")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--pages", action="store_true", help="frames per commit, per b-tree")
    parser.add_argument("--fill-only", action="store_true", help="enqueue, then stop")
    args = parser.parse_args()

    import tinyjobs
    from tinyjobs.holder import Holder
    from tinyjobs.stores.base import QueuePolicy, Settlement

    for suffix in ("", "-wal", "-shm", "-wake", "-unlock"):
        Path(args.path + suffix).unlink(missing_ok=True)
    app = tinyjobs.App(f"sqlite:///{args.path}")
    for base in range(0, args.jobs, 1000):
        app.enqueue_many([("noop", {"n": i}) for i in range(base, min(args.jobs, base + 1000))])
    if args.fill_only:
        return
    store, holder = app.store, Holder.current()
    policies = {"default": QueuePolicy(name="default")}
    conn = store._pool.get()
    if args.pages:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA wal_autocheckpoint=0")
    cpu, commits, done = time.process_time(), 0, 0
    _, claimed = store.settle_and_claim([], policies, holder, args.batch)
    while claimed:
        settlements = [Settlement(job_id=c.job.id, token=c.token, outcome="done") for c in claimed]
        applied, claimed = store.settle_and_claim(settlements, policies, holder, args.batch)
        done += sum(applied)
        commits += 1
    cpu = time.process_time() - cpu
    print(f"batch {args.batch}: {done:,} jobs, {cpu / done * 1e6:.1f} us CPU per job")
    if args.pages:
        owner = {page: name for name, page in conn.execute("SELECT name, pageno FROM dbstat")}
        data = Path(args.path + "-wal").read_bytes()
        size = struct.unpack(">I", data[8:12])[0]
        frames: collections.Counter[str] = collections.Counter()
        for offset in range(32, len(data) - 23, 24 + size):
            page = struct.unpack(">I", data[offset : offset + 4])[0]
            frames[owner.get(page, "(freed)")] += 1
        total = sum(frames.values())
        print(f"{total / commits:.1f} WAL frames per commit ({commits:,} commits)")
        for name, n in frames.most_common():
            print(f"  {name:28s} {n / commits:5.2f}")
    store.close()


if __name__ == "__main__":
    main()
