"""Start-up: from starting `tinyjobs supervise --app M:app --workers 2 --slots 8` to the first job
started, on each store, A/B between interpreters (venvs of two trees), interleaved.

Each run queues `--jobs` no-op jobs (the harness's drain pre-queues 10,000), waits a moment,
spawns the supervisor with `python -m tinyjobs` of one tree, and waits until a job body writes
its start time (time.time(), O_APPEND to a file); start-up = that time - the spawn's. The
supervisor's log gives the phases (when it logged supervisor.starting, store_ready,
worker.spawned, ...), relative to the spawn. Trees alternate run by run, stores round by round.

    python benchmarks/startup.py --py A=/work/main/.venv/bin/python --py B=.venv/bin/python \\
        --stores sqlite,redis,postgres --rounds 5
Store URLs: --sqlite (a file in a temporary directory, fresh per run), --redis (default a
server of its own on 6450: `redis-server --port 6450 --appendonly yes --appendfsync everysec`),
--postgres (default database startup_bench: `CREATE DATABASE startup_bench`); Redis is flushed
and the database's public schema dropped before each run, so never point them at the tests'.
Output: one JSON line per run on --out, then medians and ranges per store and tree.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

APP = """
import os, time
import tinyjobs
app = tinyjobs.App()

@app.task
def noop(run, i):
    fd = os.open(os.environ["STARTUP_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, b"%.6f\\n" % time.time())
    os.close(fd)
"""

FILL = """
import sys
sys.path.insert(0, sys.argv[1])
import startup_app
n = int(sys.argv[2])
for s in range(0, n, 1000):
    startup_app.noop.enqueue_many([{"i": i} for i in range(s, min(n, s + 1000))])
startup_app.app.close()
"""

PHASES = (
    "supervisor.starting",
    "supervisor.store_ready",
    "worker.spawned",
    "leader.elected",
    "worker.started",
    "job.started",
)


def reset(store: str, url: str) -> None:
    """Empty the store before a run (each tree migrates it on open)."""
    if store == "sqlite":
        path = url[len("sqlite:///") :]
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)
    elif store == "redis":
        import redis

        redis.Redis.from_url(url).flushdb()
    elif store == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
            conn.execute("CREATE SCHEMA public")


def cpu_ns(pid: int) -> int:
    """CPU time (ns) of `pid`'s threads and its children's so far, from /proc/*/schedstat:
    under the load of a shared machine a steadier figure than wall time."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return total
    return total + sum(cpu_ns(int(c)) for c in children)


def one_run(py: str, store: str, url: str, jobs: int, tmp: Path) -> dict:
    reset(store, url)
    env = dict(os.environ, TINYJOBS_URL=url, PYTHONPATH=str(tmp))
    env.pop("PYTHONUNBUFFERED", None)
    subprocess.run([py, "-c", FILL, str(tmp), str(jobs)], env=env, check=True, cwd=tmp)
    record = tmp / "record.txt"
    record.unlink(missing_ok=True)
    env["STARTUP_RECORD"] = str(record)
    log_path = tmp / "supervise.log"
    time.sleep(0.3)
    cmd = [py, "-m", "tinyjobs", "--url", url, "supervise", "--app", "startup_app:app"]
    cmd += ["--workers", "2", "--slots", "8", "--socket", str(tmp / "health.sock")]
    with open(log_path, "wb") as out:
        t_spawn = time.time()
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        first, cpu = None, 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                text = record.read_text()
            except FileNotFoundError:
                text = ""
            if text.strip():
                first = min(float(x) for x in text.split())
                cpu = cpu_ns(proc.pid)
                break
            time.sleep(0.002)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    phases: dict[str, float] = {}
    for line in log_path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        name, stamp = event.get("event"), event.get("timestamp")
        if name in PHASES and name not in phases and stamp:
            at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            phases[name] = round(at - t_spawn, 4)
    return {
        "store": store,
        "py": py,
        "startup_s": None if first is None else round(first - t_spawn, 4),
        "cpu_ms": round(cpu / 1e6, 1),  # the supervisor's and its workers' CPU when the job was seen
        "phases": phases,
        "exit": proc.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--py", action="append", required=True, help="LABEL=python of a venv (repeat)")
    parser.add_argument("--stores", default="sqlite,redis,postgres")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--sqlite", default=None, help="default: a file in a temporary directory")
    parser.add_argument("--redis", default="redis://127.0.0.1:6450/0")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/startup_bench")
    parser.add_argument("--out", default=None, help="append JSON lines here")
    args = parser.parse_args()
    trees = [tuple(p.split("=", 1)) for p in args.py]
    tmp = Path(tempfile.mkdtemp(prefix="tj-startup-"))
    (tmp / "startup_app.py").write_text(APP)
    urls = {
        "sqlite": args.sqlite or f"sqlite:///{tmp}/startup.db",
        "redis": args.redis,
        "postgres": args.postgres,
    }
    results: list[dict] = []
    out = open(args.out, "a") if args.out else None
    for r in range(args.rounds):
        for store in args.stores.split(","):
            order = trees if r % 2 == 0 else trees[::-1]
            for label, py in order:
                res = one_run(py, store, urls[store], args.jobs, tmp)
                res.update(tree=label, round=r, load=os.getloadavg()[0])
                results.append(res)
                print(json.dumps(res), file=sys.stderr)
                if out:
                    print(json.dumps(res), file=out, flush=True)
    print("| store | tree | startup s median (range) | CPU ms to it | store_ready | first spawn | runs |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for store in args.stores.split(","):
        for label, _ in trees:
            rs = [x for x in results if x["store"] == store and x["tree"] == label]
            s = [x["startup_s"] for x in rs if x["startup_s"] is not None]
            ready = [x["phases"].get("supervisor.store_ready") for x in rs]
            spawned = [x["phases"].get("worker.spawned") for x in rs]
            cpu = [x["cpu_ms"] for x in rs if x["startup_s"] is not None]
            ready = [v for v in ready if v is not None]
            print(
                f"| {store} | {label} | {_med(s)} | {_med(cpu, 1)} | {_med(ready)} "
                f"| {_med([v for v in spawned if v is not None])} | {len(s)} |"
            )


def _med(values: list[float], digits: int = 3) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


if __name__ == "__main__":
    main()
