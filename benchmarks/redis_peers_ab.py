"""The peers harness's Redis runs (/work/shared/bench/peers `run.py`) for tinyjobs as two
installs (A and B) and huey, alternated, with the Redis server's own CPU, commands and AOF
bytes diffed around each whole run (INFO cpu, commandstats, persistence): the harness's own
server figure adds every postgres process of the machine, which other programs may be using.

    python benchmarks/redis_peers_ab.py latency 3 --duration 10
    python benchmarks/redis_peers_ab.py enqueue 3 --n 5000

Environment: AB_PORT (the Redis the harness uses: give it one of its own, appendonly everysec;
default 6430), AB_A / AB_B (the Python of each tinyjobs venv, non-editable installs; default
/tmp/tj-main and /tmp/tj-redis-lowrate3), PEERS_DIR, PEERS_PY. One JSON line per run: Redis CPU
per job, AOF bytes per job, FCALL time and HDEL calls per job, and the harness's p50, worker CPU
and rate. Rounds alternate the order (A B huey, B A huey, ...); run it under /tmp/bench.lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import redis

PORT = int(os.environ.get("AB_PORT", "6430"))
URL = f"redis://127.0.0.1:{PORT}/5"
PEERS = os.environ.get("PEERS_DIR", "/work/shared/bench/peers")
PYS = {
    "A": os.environ.get("AB_A", "/tmp/tj-main/bin/python"),
    "B": os.environ.get("AB_B", "/tmp/tj-redis-lowrate3/bin/python"),
    "huey": os.environ.get("PEERS_PY", "/tmp/peers/bin/python"),
}


def snap(r: redis.Redis) -> tuple[float, dict[str, tuple[int, int]], int]:
    cpu, stats, aof = r.info("cpu"), r.info("commandstats"), r.info("persistence")
    cmds = {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for k, v in stats.items()}
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), cmds, int(aof["aof_current_size"])


def run(r: redis.Redis, label: str, scenario: str, extra: list[str]) -> None:
    system = "huey_redis" if label == "huey" else "tinyjobs_redis"
    env = {**os.environ, "BENCH_REDIS_URL": URL}
    a = snap(r)
    out = subprocess.run(
        [PYS[label], "run.py", system, scenario, *extra], cwd=PEERS, env=env, capture_output=True, text=True
    )
    b = snap(r)
    try:
        res = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        print(json.dumps({"label": label, "error": out.stderr[-800:]}), flush=True)
        return
    jobs = res.get("jobs") or res.get("n") or res.get("done") or 1

    def per_job(cmd: str, i: int) -> float:
        return (b[1].get(cmd, (0, 0))[i] - a[1].get(cmd, (0, 0))[i]) / jobs

    row = {
        "label": label,
        "scenario": scenario,
        "jobs": jobs,
        "redis_cpu_us_job": round((b[0] - a[0]) / jobs * 1e6),
        "aof_bytes_job": round((b[2] - a[2]) / jobs),
        "fcall_usec_job": round(per_job("fcall", 1)),
        "hdel_calls_job": round(per_job("hdel", 0), 2),
        "p50_ms": res.get("p50_ms"),
        "worker_cpu_us_job": res.get("worker_cpu_us_per_job"),
        "rate": res.get("jobs_per_s"),
        "load": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(row), flush=True)


def main() -> None:
    scenario, rounds, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    r = redis.Redis(port=PORT)
    orders = [["A", "B", "huey"], ["B", "A", "huey"]]
    for i in range(rounds):
        for label in orders[i % 2]:
            run(r, label, scenario, extra)


if __name__ == "__main__":
    main()
