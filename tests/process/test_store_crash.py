"""The store itself crashes and comes back (issue 17): a PostgreSQL cluster stopped with
`pg_ctl stop -m immediate`, a redis-server killed with SIGKILL and started again on the same
data (appendonly yes, appendfsync always or everysec), while an application process enqueues
and a supervised pool runs the jobs. Servers of the test's own on free loopback ports.

What must hold: every job whose enqueue returned is there and runs; no job is run by two
holders at once; the supervisor and its workers ride through without a crash, an exit or a
respawn, reconnect by themselves and log one line when the store is lost and one when it is
back; health says unhealthy (store unreachable) while it is away and healthy after; the
enqueuing process prints nothing behind the application's back."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import supervisor_harness
from support.servers import postgres_server, redis_server
from support.wait import wait_until

from tinyjobs.stores import open_store

harness = supervisor_harness.harness  # fixture
HERE = Path(__file__).resolve().parent
JOBS = 600
LEASE = "5s"  # a claim whose answer the crash lost comes back after this (plus a reap)


@contextlib.contextmanager
def crashable(kind: str, tmp_path: Path) -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """(url, crash, restart) for a store of the test's own."""
    if kind == "postgres":
        with postgres_server(tmp_path, {"fsync": "on"}) as pg:
            yield pg.url + "?schema=crash", lambda: pg.stop("immediate"), pg.start
        return
    fsync = kind.split("-")[1]
    with redis_server(tmp_path, "--appendonly", "yes", "--appendfsync", fsync) as server:
        yield server.url + "?prefix=crash", lambda: server.stop(signal.SIGKILL), server.start


def start_enqueuer(harness, url: str) -> tuple[subprocess.Popen, Path, Path]:
    acked, stderr = harness.dir / "acked.txt", harness.dir / "enqueuer.stderr"
    with open(harness.dir / "enqueuer.stdout", "w") as out, open(stderr, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "fault_enqueuer.py"), str(JOBS), str(acked)],
            env=harness.env(TINYJOBS_URL=url),
            stdout=out,
            stderr=err,
        )
    return proc, acked, stderr


def acked_ids(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def overlapping_runs(marks: list[dict]) -> list[str]:
    """Jobs with two attempts whose start..end intervals overlap (two holders at once)."""
    runs: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(dict)
    for mark in marks:
        if mark["kind"] in ("start", "end"):
            runs[mark["job"]].setdefault((mark["pid"], mark["attempt"]), []).append(mark["t"])
    bad = []
    for job, attempts in runs.items():
        spans = sorted((min(ts), max(ts)) for ts in attempts.values())
        if any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)):
            bad.append(job)
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "redis-always", "redis-everysec"])
def test_a_store_crash_under_load_loses_nothing_and_the_pool_rides_through(harness, tmp_path, kind):
    with crashable(kind, tmp_path) as (url, crash, restart):
        sup = harness.start("--workers", "2", env=harness.env(TINYJOBS_URL=url, TJ_LEASE=LEASE))
        workers = sorted(sup.wait_ready(2))
        enqueuer, acked_path, stderr_path = start_enqueuer(harness, url)
        wait_until(lambda: len(acked_ids(acked_path)) >= 200, timeout=30, what="200 acknowledged jobs")

        crash()
        down = wait_until(
            lambda: (doc := sup.try_health()) and not doc["store"]["reachable"] and doc,
            timeout=15,
            what="health to say the store is unreachable",
        )
        assert down["healthy"] is False
        assert any(p.startswith("store unreachable") for p in down["problems"]), down["problems"]
        # Down long enough for every worker to notice (they retry for a second first).
        wait_until(lambda: {e["pid"] for e in sup.event("store.unreachable")} >= {sup.pid, *workers},
                   timeout=15, what="every process to log store.unreachable")  # fmt: skip
        restart()

        assert enqueuer.wait(90) == 0, stderr_path.read_text()
        acked = acked_ids(acked_path)
        assert len(acked) == JOBS
        store = open_store(url)
        try:

            def all_done() -> bool:
                return store.counts().get("default", {}).get("done", 0) == JOBS

            wait_until(all_done, timeout=60, interval=0.2, what=f"all {JOBS} jobs done")
            missing = [i for i in acked if store.get(i) is None]
            assert missing == [], f"{len(missing)} acknowledged jobs lost, e.g. {missing[:5]}"
        finally:
            store.close()
        up = wait_until(lambda: (doc := sup.try_health()) and doc["healthy"] and doc, timeout=15,
                        what="health to say healthy again")  # fmt: skip
        assert up["store"] == {"reachable": True, "error": None}

        assert sup.proc.poll() is None, "the supervisor exited"
        assert sorted(sup.running_workers()) == workers, "a worker was replaced (crash loop?)"
        assert sup.event("worker.exited") == [] and sup.event("worker.crashed") == []
        # One line when the store is lost, one when it is back, per process that noticed.
        lost, back = sup.event("store.unreachable"), sup.event("store.reachable")
        by_pid = {pid: sum(e["pid"] == pid for e in lost) for pid in [sup.pid, *workers]}
        assert set(by_pid.values()) == {1}, by_pid
        assert sorted(e["pid"] for e in back) == sorted(e["pid"] for e in lost)
        assert [e for e in sup.events() if e.get("event") == "store.error"] == []
        # Nothing printed behind the application's back (psycopg's "error ignored terminating
        # <Pipeline [BAD]>" was), and no job was held by two workers at once.
        assert stderr_path.read_text() == ""
        assert overlapping_runs(harness.marks()) == []
        sup.signal(signal.SIGTERM)
        assert sup.wait_exit(30) == 0
