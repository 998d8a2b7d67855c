"""Where the Redis server's work goes at a low rate: the commands (INFO commandstats) and the
server's CPU (INFO cpu) of a supervised fleet, over --idle seconds without jobs and over
--seconds at --rate jobs a second, as the peers harness runs it (`tinyjobs supervise --workers 2
--slots 8`).

    python benchmarks/redis_commandstats.py --url redis://127.0.0.1:6420/9
    python benchmarks/redis_commandstats.py --url redis://127.0.0.1:6420/9 --monitor

Per command: calls and the server's microseconds inside it (a script's `usec` includes the
commands it calls, which are counted again under their own names), a second when idle and a
job under load. With --monitor a MONITOR connection counts FCALLs by function name as well
(MONITOR costs the server CPU itself: the CPU figures of such a run are not the fleet's). Give
it a server of its own: every client of the server counts."""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def snapshot(r: redis.Redis) -> tuple[float, dict[str, tuple[int, int]]]:
    """(server CPU seconds so far, {command: (calls, usec)})."""
    cpu = r.info("cpu")
    stats = r.info("commandstats")
    cmds = {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for k, v in stats.items()}
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), cmds


def delta(a, b) -> tuple[float, dict[str, tuple[int, int]]]:
    out = {}
    for k, (calls, usec) in b[1].items():
        c0, u0 = a[1].get(k, (0, 0))
        if calls - c0:
            out[k] = (calls - c0, usec - u0)
    return b[0] - a[0], out


class Monitor(threading.Thread):
    """FCALLs by function name (and every command by name) while `counting` is set."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.r = redis.Redis.from_url(url)
        self.counting = False
        self.functions: collections.Counter[str] = collections.Counter()

    def run(self) -> None:
        with self.r.monitor() as m:
            for cmd in m.listen():
                if not self.counting:
                    continue
                words = cmd["command"].split()
                if words and words[0].upper() in ("FCALL", "EVALSHA", "FCALL_RO"):
                    self.functions[words[0].upper() + " " + "_".join(words[1].split("_")[2:])] += 1


def done(app) -> int:
    return sum(states.get("done", 0) for states in app.store.counts().values())


def show(title: str, d, per: float, unit: str) -> None:
    cpu, cmds = d
    print(f"{title}: server CPU {cpu * 1e6 / per:,.0f} us a {unit}")
    print(f"  {'command':<22}{'calls/' + unit:>12}{'usec/' + unit:>12}{'usec/call':>11}")
    for k, (calls, usec) in sorted(cmds.items(), key=lambda kv: -kv[1][1]):
        print(f"  {k:<22}{calls / per:>12.2f}{usec / per:>12.1f}{usec / calls:>11.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="redis://127.0.0.1:6420/9")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--monitor", action="store_true")
    parser.add_argument(
        "--slowlog",
        action="store_true",
        help="every command's duration under load, from SLOWLOG (threshold 0)",
    )
    args = parser.parse_args()

    import tinyjobs

    r = redis.Redis.from_url(args.url)
    r.flushdb()
    app = tinyjobs.App(args.url)
    from benchmarks.app import stamp

    app.tasks["stamp"] = stamp
    env = {**os.environ, "TINYJOBS_URL": args.url, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tinyjobs", "supervise", "--app", "benchmarks.app:app"]
    cmd += ["--workers", str(args.workers), "--slots", "8"]
    sup = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    mon = None
    if args.monitor:
        mon = Monitor(args.url)
        mon.start()
    try:
        for _ in range(10):
            app.enqueue("stamp", {"sent": time.time()})
        deadline = time.monotonic() + 60
        while done(app) < 10:
            if time.monotonic() > deadline:
                raise SystemExit("warm-up not done in 60 s")
            time.sleep(0.05)
        time.sleep(2.0)
        s0 = snapshot(r)
        if mon:
            mon.counting = True
        time.sleep(args.idle)
        s1 = snapshot(r)
        if mon:
            show_functions(mon, args.idle, "second")
            mon.functions.clear()
        count = int(args.rate * args.seconds)
        if args.slowlog:
            old = r.config_get("slowlog-*")
            r.config_set("slowlog-max-len", 100000)
            r.config_set("slowlog-log-slower-than", 0)
            r.slowlog_reset()
        start = time.monotonic()
        for i in range(count):
            pause = start + i / args.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            app.enqueue("stamp", {"sent": time.time()})
        while done(app) < 10 + count:
            time.sleep(0.05)
        s2 = snapshot(r)
        if args.slowlog:
            r.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
            entries = r.slowlog_get(100000)
            r.config_set("slowlog-max-len", old["slowlog-max-len"])
            show_slowlog(entries)
        if mon:
            show_functions(mon, count, "job")
    finally:
        sup.terminate()
        sup.wait(30)
    show(f"idle {args.idle:g} s", delta(s0, s1), args.idle, "second")
    show(f"{args.rate:g} jobs/s for {args.seconds:g} s", delta(s1, s2), count, "job")
    app.close()


def show_slowlog(entries) -> None:
    """Median and quartiles of each command's (FCALL: each function's) duration."""
    import statistics

    by: dict[str, list[int]] = collections.defaultdict(list)
    for e in entries:
        words = e["command"].split()
        name = words[0].decode().upper()
        if name in ("FCALL", "EVALSHA") and len(words) > 1:
            name += " " + "_".join(words[1].decode().split("_")[2:])  # tinyjobs_<hash>_<operation>
        by[name].append(int(e["duration"]))
    parts = []
    for k, v in sorted(by.items(), key=lambda kv: -sum(kv[1])):
        v.sort()
        parts.append(
            f"{k} n={len(v)} p50 {statistics.median(v):.0f} p25 {v[len(v) // 4]} p75 {v[3 * len(v) // 4]}"
        )
    print("  durations (SLOWLOG, us): " + "; ".join(parts))


def show_functions(mon: Monitor, per: float, unit: str) -> None:
    print(
        f"  scripts by name, a {unit}: "
        + ", ".join(f"{k} {v / per:.2f}" for k, v in mon.functions.most_common())
    )


if __name__ == "__main__":
    main()
