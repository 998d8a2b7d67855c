"""What a fleet of workers costs at a low, steady rate: CPU and context switches per job of the
worker processes (and of the store's server), and the start latency, while jobs arrive one at a
time at --rate jobs a second.

    python benchmarks/low_rate.py                              # SQLite, 2 workers, 50 jobs/s
    python benchmarks/low_rate.py --workers 1 --rate 50 --seconds 10
    python benchmarks/low_rate.py --url redis://127.0.0.1:6379/9
    python benchmarks/low_rate.py --url postgresql://postgres@127.0.0.1:5432/test

At this rate a worker spends its CPU on waking up (the store's wake-up, the hand-offs between
its threads), not on the store's work, so this is where wake-ups that reach every waiter, or
one thread hop too many, show; a drain (benchmarks/worker_cpu.py) hides them.

Each run starts --workers `tinyjobs worker` processes on the benchmark app, waits until they
are idle, enqueues `stamp` jobs one at a time on a fixed schedule for --seconds, and waits for
the last to finish. Worker CPU is user + system time from /proc/<pid>/stat (every thread, exited
ones too) over that window; switches are voluntary + involuntary context switches of the
workers' threads; the server's CPU is the Redis server's own (INFO cpu) or the sum over the
processes of the PostgreSQL cluster at --url (walwriter and checkpointer included: they work for
the jobs too), not over every postgres process of the machine. It counts every session of that
cluster: on a server that other programs use too, give the benchmark a cluster of its own.
Latency is the handler's start time less the enqueue time (`stamp`'s result), read once the
window's CPU figures are taken: only a count of done jobs every 50 ms falls inside it."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.worker_cpu import FAR, cpu_seconds, done_count  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> int:
    """Voluntary + involuntary context switches of the live threads of process `pid`."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # the thread ended meanwhile
    return total


def postmaster(app) -> int:
    """The pid of the postmaster of the server at the app's URL (the parent of our backend)."""
    conn, _ = app.store._conns.get()
    backend = conn.info.backend_pid
    with open(f"/proc/{backend}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def postgres_cpu(postmaster_pid: int) -> float:
    """CPU seconds so far of one cluster: its postmaster (with the children it has reaped:
    backends that ended) and every live child (backends, walwriter, checkpointer, ...). Only
    that cluster's, so that other clusters on this machine, and other programs, do not count."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                text = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(pid) == postmaster_pid:
            total += sum(int(v) for v in fields[11:15]) / TICK  # utime stime cutime cstime
        elif int(fields[1]) == postmaster_pid:
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def server_cpu(app) -> float | None:
    """CPU seconds so far of the store's server, None for SQLite (it has none)."""
    url = app.store.url
    if url.startswith("redis"):
        import redis

        info = redis.Redis.from_url(url).info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    if url.startswith("postgres"):
        return postgres_cpu(postmaster(app))
    return None


def wait_done(app, total: int, timeout: float = 60.0) -> None:
    """Return once `total` jobs are done (one count per look: the window's store work stays
    the jobs' own, as far as a look can)."""
    deadline = time.monotonic() + timeout
    while done_count(app) < total:
        if time.monotonic() > deadline:
            raise SystemExit(f"not done within {timeout} s: {app.store.counts()}")
        time.sleep(0.05)


def latencies(app, ids: list[str]) -> list[float]:
    """The start latencies (seconds) of the done jobs `ids`: handler start less enqueue time."""
    jobs = [app.get(job_id) for job_id in ids]
    return sorted(job.result - job.args["sent"] for job in jobs)


def one_run(url: str, workers: int, slots: int, rate: float, seconds: float, log_level: str) -> dict:
    import tinyjobs
    from benchmarks.app import stamp
    from benchmarks.run import start_workers, stop_workers

    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm"):
            Path(url.removeprefix("sqlite://") + suffix).unlink(missing_ok=True)
    app = tinyjobs.App(url)
    app.tasks["stamp"] = stamp
    app.store.purge(now=time.time() + FAR, limit=10**9)
    procs = start_workers(url, workers, slots, log_level)
    try:
        # Ready when one job went through; then two seconds for startup's own work to settle.
        app.enqueue("stamp", {"sent": time.time()})
        wait_done(app, 1, timeout=30)
        time.sleep(2.0)
        cpu0 = sum(cpu_seconds(p.pid) for p in procs)
        sw0 = sum(switches(p.pid) for p in procs)
        server0 = server_cpu(app)
        ids = []
        count = int(rate * seconds)
        start = time.monotonic()
        for i in range(count):
            due = start + i / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            ids.append(app.enqueue("stamp", {"sent": time.time()}).id)
        wait_done(app, count + 1)
        cpu1 = sum(cpu_seconds(p.pid) for p in procs)
        sw1 = sum(switches(p.pid) for p in procs)
        server1 = server_cpu(app)
        taken = latencies(app, ids)  # after the window: the reads are not the jobs' cost
    finally:
        stop_workers(procs)
    app.store.purge(now=time.time() + FAR, limit=10**9)
    app.store.close()
    return {
        "cpu_us": (cpu1 - cpu0) / count * 1e6,
        "switches": (sw1 - sw0) / count,
        "server_us": None if server0 is None else (server1 - server0) / count * 1e6,
        "p50_ms": taken[len(taken) // 2] * 1e3,
        "p99_ms": taken[int(len(taken) * 0.99)] * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-low-rate.db")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--rate", type=float, default=50.0, help="jobs a second")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()

    from tinyjobs.urls import mask

    print(
        f"store {mask(args.url)}; {args.workers} workers x {args.slots} slots; "
        f"{args.rate:g} jobs/s for {args.seconds:g} s; log level {args.log_level}"
    )
    runs = []
    for i in range(args.runs):
        r = one_run(args.url, args.workers, args.slots, args.rate, args.seconds, args.log_level)
        runs.append(r)
        server = "" if r["server_us"] is None else f", server {r['server_us']:6.0f} us"
        print(
            f"run {i + 1}: workers {r['cpu_us']:6.0f} us CPU and {r['switches']:5.1f} switches per job"
            f"{server}; start latency p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms"
        )
    med = {k: statistics.median(r[k] for r in runs) for k in ("cpu_us", "switches", "p50_ms", "p99_ms")}
    server = ""
    if runs[0]["server_us"] is not None:
        server = f", server {statistics.median(r['server_us'] for r in runs):6.0f} us"
    print(
        f"median: workers {med['cpu_us']:6.0f} us CPU and {med['switches']:5.1f} switches per job"
        f"{server}; start latency p50 {med['p50_ms']:.2f} ms, p99 {med['p99_ms']:.2f} ms"
    )


if __name__ == "__main__":
    main()
