"""A bounded soak: a supervised pool on one store, jobs of mixed kinds, workers killed at random,
the store restarted twice; then every job accounted for, as verify does.

    python benchmarks/soak.py --store sqlite   --duration 10m
    python benchmarks/soak.py --store postgres --duration 10m    # needs initdb/pg_ctl
    python benchmarks/soak.py --store redis    --duration 10m    # needs redis-server

PostgreSQL and Redis run as servers of the soak's own on a free loopback port (the test
suite's tests/support/servers.py), so that it can crash them: PostgreSQL with `pg_ctl stop -m
immediate`, Redis (appendonly yes, appendfsync always) with SIGKILL, each started again on the
same data. For SQLite a "store restart" is the crash of every process that has the file open
(the supervisor and its workers, SIGKILL), then a new supervisor.

Jobs (benchmarks/soakapp.py): fast, slow (0.2-2 s), failing (fails for good), retrying (fails
its first attempt), stepped (two run.step values), child (enqueued after a fast job), and a
cron schedule every 2 s. Every handler start is recorded in a ledger outside the store.

Report: jobs sent and acknowledged, runs, kills, restarts, lost (acknowledged, not in its
expected final state: must be 0), jobs run more than their design asks (re-runs after a kill
or a crash: expected, at least once), cron due times fired twice (must be 0), worker RSS at the
start and the end, the store's size before and after purging the finished jobs."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from support.servers import postgres_server, redis_server  # noqa: E402

from tinyjobs.durations import parse_duration  # noqa: E402
from tinyjobs.errors import StoreError  # noqa: E402
from tinyjobs.supervisor.health import query  # noqa: E402

EXPECTED = {
    "fast": "done",
    "slow": "done",
    "failing": "failed",
    "retrying": "done",
    "stepped": "done",
    "child": "done",
}
DESIGNED_RUNS = {"retrying": 2}  # runs a job of that kind makes when nothing is killed


class Pool:
    """A `tinyjobs supervise` of soakapp, restartable."""

    def __init__(self, url: str, work: Path, workers: int) -> None:
        self.url, self.work, self.workers = url, work, workers
        self.proc: subprocess.Popen | None = None
        self.socket = str(work / "health.sock")
        self.starts = 0

    def start(self) -> None:
        env = {
            **os.environ,
            "TINYJOBS_URL": self.url,
            "SOAK_LEDGER": str(self.work / "ledger.jsonl"),
            "PYTHONPATH": str(ROOT / "benchmarks"),
            "TINYJOBS_LOG_LEVEL": "warning",
        }
        with open(self.work / f"supervise-{self.starts}.log", "w") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tinyjobs",
                    "supervise",
                    "--app",
                    "soakapp:app",
                    "--workers",
                    str(self.workers),
                    "--slots",
                    "8",
                    "--socket",
                    self.socket,
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1

    def health(self) -> dict | None:
        try:
            return query(self.socket, 2.0)
        except (OSError, ValueError):
            return None

    def worker_pids(self) -> list[int]:
        doc = self.health()
        return [w["pid"] for w in doc["workers"] if w["state"] == "running"] if doc else []

    def rss(self) -> list[int]:
        doc = self.health()
        return [w["rss"] for w in doc["workers"] if w.get("rss")] if doc else []

    def crash(self) -> None:
        """SIGKILL the supervisor and every worker (a host's crash, for SQLite)."""
        pids = self.worker_pids()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(30)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.crash()


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"soak: timed out after {timeout:g} s waiting for {what}")


def enqueue_loop(app, stop: threading.Event, rate: float, acked: dict[str, str], failures: list[int]) -> None:
    """Send jobs of mixed kinds at `rate` a second; `acked` gets id -> kind once enqueue returned.
    A failed call is retried with the same id (its outcome was unknown)."""
    rng = random.Random(7)
    n = 0
    next_at = time.monotonic()
    while not stop.is_set():
        kind = rng.choices(list(EXPECTED), weights=[50, 10, 5, 10, 10, 15])[0]
        job_id = f"soak:{n}"
        while not stop.is_set():
            try:
                if kind == "child":
                    parent = f"soak:{n}:parent"
                    app.enqueue("fast", {"n": n}, id=parent)
                    acked[parent] = "fast"
                    app.enqueue("child", {"n": n}, id=job_id, after=[parent])
                elif kind == "slow":
                    app.enqueue("slow", {"n": n, "seconds": round(rng.uniform(0.2, 2.0), 2)}, id=job_id)
                else:
                    app.enqueue(kind, {"n": n}, id=job_id)
                acked[job_id] = kind
                break
            except StoreError:
                failures[0] += 1
                time.sleep(0.1)
        n += 1
        next_at += 1.0 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))


def store_size(kind: str, store) -> int:
    """Bytes the store uses for this soak's jobs."""
    if kind == "sqlite":
        return sum(os.path.getsize(p) for p in Path(store.path).parent.glob(Path(store.path).name + "*"))
    if kind == "postgres":

        def op(cur, retrying):
            cur.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'",
                (store.schema,),
            )
            return int(cur.fetchone()[0])

        return store._run(op, write=False)
    return int(store._conn.client().info("memory")["used_memory"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "redis"], required=True)
    parser.add_argument("--duration", default="10m")
    parser.add_argument("--rate", type=float, default=20.0, help="jobs sent a second")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-every", default="20s", help="SIGKILL a random worker this often")
    args = parser.parse_args()
    duration = parse_duration(args.duration, "--duration")
    kill_every = parse_duration(args.kill_every, "--kill-every")
    work = Path(tempfile.mkdtemp(prefix=f"soak-{args.store}-"))
    with contextlib.ExitStack() as stack:
        if args.store == "sqlite":
            url, restart = f"sqlite:///{work}/soak.db", None
        elif args.store == "postgres":
            pg = stack.enter_context(postgres_server(work, {"fsync": "on"}))
            url = pg.url + "?schema=soak"

            def restart() -> None:
                pg.stop("immediate")
                time.sleep(2.0)
                pg.start()
        else:
            server = stack.enter_context(redis_server(work, "--appendonly", "yes", "--appendfsync", "always"))
            url = server.url + "?prefix=soak"

            def restart() -> None:
                server.stop(signal.SIGKILL)
                time.sleep(2.0)
                server.start()

        import soakapp

        soakapp.app.url, soakapp.app._store = url, None
        app = soakapp.app
        pool = Pool(url, work, args.workers)
        pool.start()
        wait_for(lambda: len(pool.rss()) == args.workers, 60, "the pool to start")
        rss_start = pool.rss()
        acked: dict[str, str] = {}
        failures = [0]
        stop = threading.Event()
        sender = threading.Thread(target=enqueue_loop, args=(app, stop, args.rate, acked, failures))
        started = time.monotonic()
        sender.start()
        rng = random.Random(17)
        kills, restarts = 0, 0
        restart_at = [started + duration / 3, started + 2 * duration / 3]
        next_kill = started + kill_every
        while time.monotonic() - started < duration:
            time.sleep(0.5)
            now = time.monotonic()
            if restart_at and now >= restart_at[0]:
                restart_at.pop(0)
                if restart is None:
                    pool.crash()
                    pool.start()
                else:
                    restart()
                restarts += 1
            elif now >= next_kill:
                pids = pool.worker_pids()
                if pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(rng.choice(pids), signal.SIGKILL)
                    kills += 1
                next_kill = now + kill_every
        stop.set()
        sender.join(60)
        rss_end = pool.rss()

        def settled() -> bool:
            counts = app.store.counts().get("default", {})
            return counts.get("pending", 0) + counts.get("running", 0) + counts.get("blocked", 0) == 0

        wait_for(settled, 120, "every job to reach a final state")
        pool.stop()
        ledger = [json.loads(line) for line in (work / "ledger.jsonl").read_text().splitlines() if line]
        runs = Counter(e["job"] for e in ledger)
        lost, wrong = [], []
        for job_id, kind in acked.items():
            job = app.get(job_id, executions=False)
            if job is None:
                lost.append(job_id)
            elif job.state != EXPECTED[kind]:
                wrong.append((job_id, kind, job.state))
        extra = sum(max(0, runs[j] - DESIGNED_RUNS.get(k, 1)) for j, k in acked.items())
        # A due time fired twice is two jobs for it; one job run twice (its worker was killed)
        # is a re-run, counted with the others.
        fired: dict[str, set[str]] = {}
        for entry in ledger:
            if entry["kind"] == "tick":
                fired.setdefault(entry["due"], set()).add(entry["job"])
        reruns = sum(count - 1 for job, count in runs.items() if job.startswith("cron:"))
        size_before = store_size(args.store, app.store)
        purged = 0
        while (n := app.store.purge(time.time() + 100 * 365 * 86400)) > 0:
            purged += n
        size_after = store_size(args.store, app.store)
        report = {
            "store": args.store,
            "duration_s": round(duration),
            "sent": len(acked),
            "enqueue_failures": failures[0],
            "runs": len(ledger),
            "kills": kills,
            "store_restarts": restarts,
            "lost": len(lost),
            "not_in_expected_state": len(wrong),
            "examples": (lost + wrong)[:5],
            "extra_runs": extra + reruns,
            "cron_due_times": len(fired),
            "cron_fired_twice": sum(1 for jobs in fired.values() if len(jobs) > 1),
            "worker_rss_mb_start": round(statistics.median(rss_start) / 2**20, 1) if rss_start else None,
            "worker_rss_mb_end": round(statistics.median(rss_end) / 2**20, 1) if rss_end else None,
            "store_bytes_before_purge": size_before,
            "purged": purged,
            "store_bytes_after_purge": size_after,
        }
        app.close()
        print(json.dumps(report))
        sys.exit(1 if lost or wrong or report["cron_fired_twice"] else 0)


if __name__ == "__main__":
    main()
