"""The peers harness's runs in a sequence of your choosing, with the PostgreSQL server's own
counters read around each run: what the whole suite does to a PostgreSQL drain (issue 14).

Each step is `system:scenario` (e.g. `tinyjobs_pg:drain`, `pgqueuer_pg:enqueue_bulk`), run as
the harness's `run.py` is run by its `suite.py`: tinyjobs_* with --tj-py, any other system with
--peers-py (a step's own interpreter after `@`: `tinyjobs_pg:drain@/tmp/tj-old/bin/python`),
from the harness's folder (the harness is not changed). Around each step it reads the
cluster's WAL and checkpoint counters (pg_stat_wal, pg_stat_bgwriter); after a tinyjobs_pg step,
before the next step's reset() drops the database, the database's own counters (transactions,
the jobs table's and its indexes' rows and blocks), so that a drain's figure comes with what the
server did for it: WAL bytes and full-page images per job, transactions per job (one per
claiming cycle, as the worker's cycle is one implicit transaction), index entries read per job.

    python benchmarks/pg_suite_seq.py --tj-py /tmp/tj-ours/bin/python \
        --seq tinyjobs_pg:enqueue,pgqueuer_pg:enqueue,tinyjobs_pg:drain --out /tmp/seq.jsonl

One JSON line per step on stdout (and --out): the harness's result under "run", the counters'
differences under "pg". Run it under the bench lock (`flock /tmp/bench.lock`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import psycopg

DSN = os.environ.get("BENCH_PG_DSN", "postgresql://bench:bench@127.0.0.1:5432/bench")
TJ_DB = "bench_tinyjobs"

_CLUSTER = """
SELECT w.wal_records, w.wal_fpi, w.wal_bytes::bigint, w.wal_sync, w.wal_write,
       b.checkpoints_timed, b.checkpoints_req, b.buffers_checkpoint, b.buffers_clean,
       b.buffers_backend, b.buffers_backend_fsync
FROM pg_stat_wal w, pg_stat_bgwriter b
"""
_CLUSTER_NAMES = (
    "wal_records",
    "wal_fpi",
    "wal_bytes",
    "wal_sync",
    "wal_write",
    "ckpt_timed",
    "ckpt_req",
    "buf_ckpt",
    "buf_clean",
    "buf_backend",
    "buf_backend_fsync",
)

_DB = """
SELECT d.xact_commit, d.xact_rollback, d.blks_hit, d.blks_read, d.tup_fetched, d.tup_returned
FROM pg_stat_database d WHERE d.datname = current_database()
"""
_DB_NAMES = ("commits", "rollbacks", "blks_hit", "blks_read", "tup_fetched", "tup_returned")
_TABLE_NAMES = (
    "seq_scan",
    "idx_scan",
    "ins",
    "upd",
    "hot_upd",
    "dead",
    "live",
    "heap_blks",
    "idx_blks",
    "bytes",
)
_TABLE = """
SELECT t.relname, t.seq_scan, t.idx_scan, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd,
       t.n_dead_tup, t.n_live_tup, io.heap_blks_hit + io.heap_blks_read,
       io.idx_blks_hit + io.idx_blks_read, pg_relation_size(t.relid)
FROM pg_stat_user_tables t JOIN pg_statio_user_tables io USING (relid)
WHERE t.relname IN ('jobs', 'executions')
"""
_INDEXES = """
SELECT i.indexrelname, i.idx_scan, i.idx_tup_read, i.idx_tup_fetch, pg_relation_size(i.indexrelid)
FROM pg_stat_user_indexes i WHERE i.relname = 'jobs'
"""


def cluster() -> dict[str, int]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        row = conn.execute(_CLUSTER).fetchone()
    assert row is not None
    return dict(zip(_CLUSTER_NAMES, (int(v) for v in row), strict=True))


def database(dbname: str) -> dict[str, Any]:
    """The counters of `dbname` (None when it does not exist)."""
    dsn = psycopg.conninfo.make_conninfo(DSN, dbname=dbname)
    out: dict[str, Any] = {}
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError:
        return out
    with conn:
        row = conn.execute(_DB).fetchone()
        if row:
            out["db"] = dict(zip(_DB_NAMES, row, strict=True))
        for r in conn.execute(_TABLE).fetchall():
            out[r[0]] = dict(zip(_TABLE_NAMES, r[1:], strict=True))
        out["indexes"] = {
            r[0]: {"scans": r[1], "read": r[2], "fetch": r[3], "bytes": r[4]} for r in conn.execute(_INDEXES)
        }
    return out


def _postgres_cpu() -> dict[int, tuple[str, int]]:
    """{pid: (process title, utime+stime+cutime+cstime ticks)} of every postgres process."""
    out: dict[int, tuple[str, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                title = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm != "postgres":
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # the postmaster's own time is not counted: its children's (exited backends') is
        first = 13 if title.startswith("/usr/lib/postgresql") else 11
        out[int(name)] = (title, sum(int(v) for v in fields[first:15]))
    return out


def _category(title: str) -> str:
    """What a postgres process is, from its title (`postgres: 15/main: bench bench_tinyjobs ...`)."""
    rest = title.split(":", 2)[-1].strip()
    if rest.startswith(("checkpointer", "background writer", "walwriter", "autovacuum", "logical")):
        return rest.split()[0]
    if rest.startswith("bench bench_tinyjobs"):
        return "tj_backends"
    if title.startswith("/usr/lib/postgresql"):
        return "postmaster_children_exited"
    return "other_backends"


class Sampler:
    """The CPU of the postgres processes by kind over a step: each live process's last sample, and
    the postmaster's children's time for those that exited (the harness sums the same ticks)."""

    def __init__(self) -> None:
        self.first = _postgres_cpu()
        self.last = dict(self.first)
        self.titles: list[str] = []
        self._stop = False
        import threading

        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            self.last.update(_postgres_cpu())
            time.sleep(0.02)

    def stop(self) -> dict[str, float]:
        self._stop = True
        self._thread.join()
        now = _postgres_cpu()
        self.last.update(now)
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for pid, (title, ticks) in self.last.items():
            cat = _category(title)
            if pid not in now:
                # exited in the step: counted in the postmaster's children's time; by kind here
                cat = "of_which_exited_" + cat
            used = (ticks - self.first.get(pid, (title, 0))[1]) / tick
            out[cat] = out.get(cat, 0) + used
            if used >= 0.1 and cat.endswith("other_backends"):
                self.titles.append(f"{pid} {title} {used:.2f}")
        return {k: round(v, 2) for k, v in out.items()}


def run_step(step: str, args: argparse.Namespace) -> dict[str, Any]:
    step, _, own_py = step.partition("@")
    system, scenario = step.split(":")
    py = own_py or (args.tj_py if system.startswith("tinyjobs_") else args.peers_py)
    before = cluster()
    sampler = Sampler()
    t0 = time.time()
    proc = subprocess.run(
        [py, "run.py", system, scenario, *args.extra],
        cwd=args.peers,
        capture_output=True,
        text=True,
        timeout=400,
    )
    wall = time.time() - t0
    cpu = sampler.stop()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    res = json.loads(lines[-1]) if lines else {"error": proc.stderr[-500:]}
    after = cluster()
    pg: dict[str, Any] = {k: after[k] - before[k] for k in after}
    pg["cpu_s"] = cpu
    if sampler.titles:
        pg["busy_others"] = sampler.titles
        print("  others:", sampler.titles, file=sys.stderr)
    if system == "tinyjobs_pg":
        pg["tj"] = database(TJ_DB)
    jobs = res.get("done") or args.n
    pg["wal_bytes_per_job"] = round(pg["wal_bytes"] / jobs, 1)
    pg["fpi_per_job"] = round(pg["wal_fpi"] / jobs, 3)
    at = time.strftime("%H:%M:%S", time.gmtime(t0))
    return {"step": step, "py": py, "at": at, "wall_s": round(wall, 1), "run": res, "pg": pg}


def summary(rec: dict[str, Any]) -> str:
    r, pg = rec["run"], rec["pg"]
    parts = [rec["at"], rec["step"], os.path.basename(os.path.dirname(os.path.dirname(rec["py"])))]
    if "jobs_per_s" in r:
        parts.append(f"{r['jobs_per_s']:.0f}/s")
    for key in ("worker_cpu_us_per_job_steady", "server_cpu_us_per_job_steady"):
        if key in r:
            parts.append(f"{key.split('_')[0]}={r[key]}")
    parts.append(f"wal/job={pg['wal_bytes_per_job']} fpi/job={pg['fpi_per_job']}")
    parts.append(f"ckpt={pg['ckpt_timed']}+{pg['ckpt_req']}")
    parts.append("cpu_s=" + ",".join(f"{k}:{v}" for k, v in sorted(pg["cpu_s"].items()) if v))
    tj = pg.get("tj", {})
    if "db" in tj and r.get("done"):
        n = r["done"]
        parts.append(f"commits/job={tj['db']['commits'] / n:.3f}")
        jobs = tj.get("jobs", {})
        index = tj.get("indexes", {})
        # jobs_running entries read per job: ~4 when each settlement probes its token; in the
        # hundreds when a settle plan scans the whole index (see m010)
        for name in ("jobs_claim", "jobs_running"):
            parts.append(f"{name}_read/job={(index.get(name, {}).get('read') or 0) / n:.1f}")
        parts.append(f"heap_blks/job={(jobs.get('heap_blks') or 0) / n:.1f} seq_scans={jobs.get('seq_scan')}")
    return " ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", required=True, help="comma-separated system:scenario steps")
    ap.add_argument("--repeat", type=int, default=1, help="run the sequence this many times")
    ap.add_argument("--tj-py", default="/tmp/tj-ours/bin/python")
    ap.add_argument("--peers-py", default="/tmp/peers/bin/python")
    ap.add_argument("--peers", default="/work/shared/bench/peers")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--out")
    ap.add_argument("extra", nargs="*", help="after --: arguments for every run.py")
    args = ap.parse_args()
    out = open(args.out, "a") if args.out else None
    for _ in range(args.repeat):
        for step in args.seq.split(","):
            rec = run_step(step, args)
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            print(summary(rec), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
