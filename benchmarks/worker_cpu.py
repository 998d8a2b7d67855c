"""The worker's CPU cost per job: what one `tinyjobs worker` process spends (user + system
time, all of its threads, its store client included) to run and settle a no-op job.

    python benchmarks/worker_cpu.py
    python benchmarks/worker_cpu.py --jobs 40000 --runs 5 --slots 8
    python benchmarks/worker_cpu.py --url redis://127.0.0.1:6379/9
    python benchmarks/worker_cpu.py --url stub:// --jobs 100000 --pin 1

CPU seconds per job depend far less than the jobs/s of benchmarks/run.py on what else runs on
the machine, so before/after comparisons of worker changes hold on a shared machine too (take
the median of several runs, and alternate the two versions). --pin steadies them further; the
figures are then lower than unpinned ones (no GIL hand-offs across cores): compare like with
like. Each run enqueues --jobs no-op jobs (SQLite: into a fresh file), starts one worker with stdout to
/dev/null (JSON lines, as in production when stdout is not a terminal), and reads the worker's
/proc/<pid>/stat once the first --warmup jobs are done and again when all are: startup (imports,
opening the store) is left out. The store must hold no other jobs.

With stub:// the worker runs in this process against StubStore, a stand-in that costs almost
nothing, and the CPU time is this process's: what remains is the worker's own cost (threads,
wake-ups, logging, running the handler), so a change to the worker shows there most clearly."""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TICK = os.sysconf("SC_CLK_TCK")
FAR = 10 * 365 * 86400  # purge "now": every finished job is past its retention


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (every thread of it) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime and stime, fields 14 and 15


def done_count(app) -> int:
    return sum(states.get("done", 0) for states in app.store.counts().values())


def wait_for(app, total: int, worker: subprocess.Popen, timeout: float = 600.0) -> int:
    """Poll until `total` jobs are done; the count then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = done_count(app)
        if done >= total:
            return done
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited with {worker.returncode}")
        time.sleep(0.02)
    raise SystemExit(f"not done within {timeout} s: {app.store.counts()}")


def one_run(
    url: str, jobs: int, warmup: int, slots: int, log_level: str, pin: int | None
) -> tuple[float, float]:
    """CPU microseconds per job and jobs per second of one worker draining `jobs` jobs."""
    import tinyjobs
    from benchmarks.run import start_workers

    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm"):
            Path(url.removeprefix("sqlite://") + suffix).unlink(missing_ok=True)
    app = tinyjobs.App(url)
    app.store.purge(now=time.time() + FAR, limit=10**9)
    for base in range(0, jobs, 1000):
        app.enqueue_many([("noop", {"n": i}) for i in range(base, min(jobs, base + 1000))])
    [worker] = start_workers(url, 1, slots, log_level)
    if pin is not None:
        os.sched_setaffinity(worker.pid, {pin})
    try:
        first = wait_for(app, warmup, worker)
        cpu0, t0 = cpu_seconds(worker.pid), time.monotonic()
        last = wait_for(app, jobs, worker)
        cpu1, t1 = cpu_seconds(worker.pid), time.monotonic()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
    app.store.purge(now=time.time() + FAR, limit=10**9)
    app.store.close()
    return (cpu1 - cpu0) / (last - first) * 1e6, (last - first) / (t1 - t0)


class StubStore:
    """Just what a Worker calls, at almost no cost: claims hand out `jobs` prebuilt no-op jobs,
    settlements and renewals always succeed."""

    url = "stub://"

    def __init__(self, jobs: int) -> None:
        from tinyjobs.job import Job
        from tinyjobs.stores.base import Claimed

        self._claims = [
            Claimed(Job(f"job-{i:08d}", "noop", "default", {"n": i}, "running", attempts=1), f"t{i}", 60.0)
            for i in range(jobs)
        ]
        self._claims.reverse()  # taken from the end: handed out in order

    def claim(self, queues, holder, limit, now=None):
        taken = self._claims[-limit:] if limit > 0 else []
        del self._claims[len(self._claims) - len(taken) :]
        return taken

    def settle(self, settlements, now=None):
        return [True] * len(settlements)

    def settle_and_claim(self, settlements, queues, holder, limit, now=None):
        return self.settle(settlements), self.claim(queues, holder, limit)

    def renew(self, tokens, now=None):
        return dict.fromkeys(tokens, "ok")

    def wait(self, queues, timeout):
        time.sleep(timeout)
        return False

    def close(self) -> None:
        pass


def in_process(jobs: int, warmup: int, slots: int, log_level: str, pin: int | None) -> tuple[float, float]:
    """`one_run` with a StubStore: one Worker in this process, logging JSON to /dev/null."""
    os.environ["TINYJOBS_LOG_LEVEL"] = log_level
    from benchmarks.app import noop
    from tinyjobs import App, log
    from tinyjobs.stop import StopReason
    from tinyjobs.worker import Worker

    if pin is not None:
        os.sched_setaffinity(0, {pin})
    log.configure(json=True, stream=open(os.devnull, "w"), buffered=True)
    app = App(StubStore(jobs))
    app.tasks["noop"] = noop
    marks: list[tuple[int, float, float]] = []

    def on_tick(worker: Worker) -> None:
        if not marks and worker.finished >= warmup or marks and worker.finished >= jobs:
            marks.append((worker.finished, time.process_time(), time.monotonic()))
        if worker.finished >= jobs:
            worker.request_stop(StopReason.MAX_JOBS)

    Worker(app, slots=slots, on_tick=on_tick, handle_signals=False, reaper=False).run()
    (first, cpu0, t0), (last, cpu1, t1) = marks[0], marks[-1]
    return (cpu1 - cpu0) / (last - first) * 1e6, (last - first) / (t1 - t0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-worker-cpu.db")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=1000, help="jobs done before the clock starts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--log-level", default="info", help="the worker's (info logs every transition)")
    parser.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="run the worker on this CPU only: far steadier figures on a busy machine, as its "
        "threads then never hand the GIL across cores",
    )
    args = parser.parse_args()

    from tinyjobs.urls import mask

    where = "in this process" if args.url == "stub://" else "1 worker"
    print(
        f"store {mask(args.url)}; {where}, {args.slots} slots; {args.jobs:,} jobs; log level {args.log_level}"
    )
    cpu, rate = [], []
    for i in range(args.runs):
        measure = in_process if args.url == "stub://" else partial(one_run, args.url)
        us, per_s = measure(args.jobs, args.warmup, args.slots, args.log_level, args.pin)
        cpu.append(us)
        rate.append(per_s)
        print(f"run {i + 1}: {us:7.1f} us CPU per job, {per_s:8,.0f} jobs/s")
    print(f"median: {statistics.median(cpu):7.1f} us CPU per job, {statistics.median(rate):8,.0f} jobs/s")


if __name__ == "__main__":
    main()
