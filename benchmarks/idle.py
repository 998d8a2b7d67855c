"""What an idle worker costs: the CPU time one `tinyjobs worker` process spends per second of
waiting for jobs that do not come (all of its threads: loop, store watcher, heartbeat, reaper),
and how soon it then starts a job enqueued by another process.

    python benchmarks/idle.py --url sqlite:////tmp/tinyjobs-idle.db
    python benchmarks/idle.py --url redis://127.0.0.1:6379/9 --seconds 20
    python benchmarks/idle.py --url postgresql://postgres@127.0.0.1:5432/bench --python /other/venv/bin/python

The worker runs one warm-up job, settles down for --settle seconds, and its /proc/<pid>/stat is
read before and after --seconds of idleness. Then a few `stamp` jobs, one at a time, measure the
start latency of a job that arrives at an idle worker (the handler's time.time() minus the
time just before the enqueue call). --python runs the worker with another interpreter (an A/B
against another tree's venv); the measuring process always uses this tree."""

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

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (every thread of it) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_worker(python: str, url: str) -> subprocess.Popen:
    env = {**os.environ, "TINYJOBS_URL": url, "PYTHONPATH": str(ROOT)}
    command = [python, "-m", "tinyjobs", "worker", "--app", "benchmarks.app:app", "--slots", "8"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=ROOT)


def result_of(app, job_id: str, deadline: float) -> float:
    while time.monotonic() < deadline:
        job = app.get(job_id)
        if job is not None and job.state == "done":
            return float(job.result)
        time.sleep(0.01)
    raise SystemExit(f"job {job_id} not done in time")


def one_run(python: str, url: str, seconds: float, settle: float, probes: int) -> tuple[float, list[float]]:
    """CPU milliseconds per second of one idle worker, and the start latencies in ms."""
    import tinyjobs

    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm", ".wake"):
            Path(url.removeprefix("sqlite://") + suffix).unlink(missing_ok=True)
    app = tinyjobs.App(url)
    app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)
    worker = start_worker(python, url)
    try:
        job = app.enqueue("stamp", {"sent": time.time()})
        result_of(app, job.id, time.monotonic() + 60)
        time.sleep(settle)
        cpu0, t0 = cpu_seconds(worker.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = cpu_seconds(worker.pid), time.monotonic()
        latencies = []
        for _ in range(probes):
            time.sleep(0.3)  # idle again between probes
            sent = time.time()
            job = app.enqueue("stamp", {"sent": sent})
            latencies.append((result_of(app, job.id, time.monotonic() + 30) - sent) * 1000)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
    app.store.purge(now=time.time() + 10 * 365 * 86400, limit=10**9)
    app.close()
    return (cpu1 - cpu0) / (t1 - t0) * 1000, latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-idle.db")
    parser.add_argument("--python", default=sys.executable, help="the worker's interpreter")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--probes", type=int, default=5)
    args = parser.parse_args()
    from tinyjobs.urls import mask

    cpu, lat = one_run(args.python, args.url, args.seconds, args.settle, args.probes)
    print(
        f"{mask(args.url)} ({args.python}): idle {cpu:.2f} ms CPU/s; start latency when idle "
        f"median {statistics.median(lat):.2f} ms, max {max(lat):.2f} ms"
    )


if __name__ == "__main__":
    main()
