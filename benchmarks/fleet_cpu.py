"""What a supervised fleet costs, process by process: the CPU a second of the supervisor and of
each worker of `tinyjobs supervise --workers N`, idle or at a steady --rate of jobs a second,
read from each thread's /proc schedstat (nanoseconds, not the 10 ms ticks of /proc/<pid>/stat),
and with --strace the system calls each process makes (a second or a job).

    python benchmarks/fleet_cpu.py --url sqlite:////tmp/tinyjobs-fleet.db            # idle
    python benchmarks/fleet_cpu.py --url redis://127.0.0.1:6379/9 --rate 50 --seconds 20
    python benchmarks/fleet_cpu.py --tree /work/main --url ... --strace             # another tree

At 50 jobs a second every 1 ms of CPU a second of a process is 20 µs per job, so the fixed costs
of the supervisor and of a worker without jobs (its timers, the leader's duties, reports) show
here. --tree runs the fleet of another checkout (its .venv's `tinyjobs`, its benchmarks/app.py):
an A/B. The store must hold no other jobs (SQLite files are removed, a Redis db is flushed)."""

from __future__ import annotations

import argparse
import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of each live thread of `pid`, by `tid:name`."""
    return {k: cpu for k, (cpu, _) in thread_stats(pid).items()}


def thread_stats(pid: int) -> dict[str, tuple[float, int]]:
    """CPU seconds and context switches (voluntary and not) so far of each live thread of
    `pid`, by `tid:name`: a switch is a wake-up, the fixed cost of a thread at a low rate."""
    out = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(task + "/comm") as f:
                name = f.read().strip()
            with open(task + "/schedstat") as f:
                cpu = int(f.read().split()[0]) / 1e9
            with open(task + "/status") as f:
                switches = sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
            out[task.rsplit("/", 1)[1] + ":" + name] = (cpu, switches)
        except OSError:
            pass
    return out


def syscalls(path: str) -> dict[str, int]:
    """The calls column of an `strace -c` summary, by system call."""
    counts = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[3].isdigit() and not line.startswith(("-", "%")):
                counts[parts[-1]] = int(parts[3])
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="sqlite:////tmp/tinyjobs-fleet.db")
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose fleet runs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=0.0, help="jobs a second (0: idle)")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--strace", action="store_true", help="count each process's system calls")
    parser.add_argument("--threads", action="store_true", help="each thread's CPU and switches")
    args = parser.parse_args()
    import tinyjobs

    url, tree = args.url, args.tree
    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm", ".wake"):
            Path(url.removeprefix("sqlite://") + suffix).unlink(missing_ok=True)
    elif url.startswith("redis://"):
        import redis

        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()
    env = {**os.environ, "TINYJOBS_URL": url, "PYTHONPATH": tree}
    command = [f"{tree}/.venv/bin/tinyjobs", "--url", url, "supervise", "--app", "benchmarks.app:app"]
    command += ["--workers", str(args.workers), "--slots", "8"]
    sup = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tree)
    app = tinyjobs.App(url)
    tracers: list[tuple[int, subprocess.Popen[bytes], str]] = []
    try:
        time.sleep(3)
        for i in range(10):  # warm-up: every worker has claimed and settled
            app.enqueue("noop", {"n": i})
        time.sleep(4)
        with open(f"/proc/{sup.pid}/task/{sup.pid}/children") as f:
            pids = [sup.pid] + [int(p) for p in f.read().split()]
        if args.strace:
            for pid in pids:
                path = f"/tmp/tinyjobs-fleet-strace-{pid}.txt"
                strace = ["strace", "-c", "-f", "-p", str(pid), "-o", path]
                tracer = subprocess.Popen(strace, stderr=subprocess.DEVNULL)
                tracers.append((pid, tracer, path))
            time.sleep(1)
        before, began = {p: thread_stats(p) for p in pids}, time.monotonic()
        jobs = int(args.seconds * args.rate)
        if jobs:
            start = time.time()
            for i in range(jobs):
                delay = start + i / args.rate - time.time()
                if delay > 0:
                    time.sleep(delay)
                app.enqueue("noop", {"n": i})
            time.sleep(0.5)
        else:
            time.sleep(args.seconds)
        after, elapsed = {p: thread_stats(p) for p in pids}, time.monotonic() - began
        for _, tracer, _ in tracers:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
        total, total_switches = 0.0, 0
        for pid in pids:
            threads = {
                k: (cpu - before[pid].get(k, (0.0, 0))[0], n - before[pid].get(k, (0.0, 0))[1])
                for k, (cpu, n) in after[pid].items()
            }
            spent = sum(cpu for cpu, _ in threads.values())
            switched = sum(n for _, n in threads.values())
            total, total_switches = total + spent, total_switches + switched
            role = "supervisor" if pid == sup.pid else "worker"
            per_job = (
                f", {spent / jobs * 1e6:.0f} µs a job, {switched / jobs:.2f} switches a job" if jobs else ""
            )
            print(f"{role} {pid}: {spent / elapsed * 1000:.2f} ms of CPU a second{per_job}")
            if args.threads:
                for key, (cpu, n) in sorted(threads.items(), key=lambda kv: -kv[1][0]):
                    if n:
                        scale, unit = (jobs, "a job") if jobs else (elapsed, "a second")
                        print(f"    {key:24} {cpu / scale * 1e6:8.0f} µs {n / scale:6.2f} switches {unit}")
            for q, _, path in tracers:
                if q == pid:
                    counts = syscalls(path)
                    for name, calls in sorted(counts.items(), key=lambda kv: -kv[1]):
                        rate = f"{calls / jobs:.2f} a job" if jobs else f"{calls / elapsed:.1f} a second"
                        print(f"    {name:16} {rate}")
        per_job = (
            f", {total / jobs * 1e6:.0f} µs a job, {total_switches / jobs:.2f} switches a job" if jobs else ""
        )
        print(f"fleet: {total / elapsed * 1000:.2f} ms of CPU a second{per_job}")
    finally:
        sup.send_signal(signal.SIGTERM)
        sup.wait(60)
        app.close()


if __name__ == "__main__":
    main()
