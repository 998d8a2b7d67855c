"""The store itself crashes and comes back (issue 17): a PostgreSQL cluster stopped with
`pg_ctl stop -m immediate`, a redis-server killed with SIGKILL and started again on the same
data (appendonly yes, appendfsync always or everysec), while an application process enqueues
and a supervised pool runs the jobs. Servers of the test's own on free loopback ports.

What must hold: every job whose enqueue returned is there and runs; no job is run by two
holders at once; the supervisor and its workers ride through without a crash, an exit or a
respawn, reconnect by themselves and log one line when the store is lost and one when it is
back; health says degraded (store unreachable, with the reason) while it is away and healthy
after, and `tinyjobs check --socket` warns then (exit 0); the
enqueuing process prints nothing behind the application's back."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import supervisor_harness
from support.servers import postgres_server, redis_server
from support.wait import wait_until

from tinyjobs.stores import open_store
from tinyjobs.stores.base import NewJob

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


@pytest.fixture
def enqueuers() -> Iterator[list[subprocess.Popen]]:
    """Enqueuing processes started by the test, killed at its end if they still run."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def start_enqueuer(harness, url: str, enqueuers: list) -> tuple[subprocess.Popen, Path, Path]:
    acked, stderr = harness.dir / "acked.txt", harness.dir / "enqueuer.stderr"
    with open(harness.dir / "enqueuer.stdout", "w") as out, open(stderr, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "fault_enqueuer.py"), str(JOBS), str(acked)],
            env=harness.env(TINYJOBS_URL=url),
            stdout=out,
            stderr=err,
        )
    enqueuers.append(proc)
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
def test_a_store_crash_under_load_loses_nothing_and_the_pool_rides_through(
    harness, tmp_path, kind, enqueuers
):
    with crashable(kind, tmp_path) as (url, crash, restart):
        sup = harness.start("--workers", "2", env=harness.env(TINYJOBS_URL=url, TJ_LEASE=LEASE))
        workers = sorted(sup.wait_ready(2))
        enqueuer, acked_path, stderr_path = start_enqueuer(harness, url, enqueuers)
        wait_until(lambda: len(acked_ids(acked_path)) >= 200, timeout=30, what="200 acknowledged jobs")

        crash()
        down = wait_until(
            lambda: (doc := sup.try_health()) and not doc["store"]["reachable"] and doc,
            timeout=15,
            what="health to say the store is unreachable",
        )
        assert down["healthy"] is False and down["status"] == "degraded", down
        assert any(p.startswith("store unreachable") for p in down["problems"]), down["problems"]
        checked = subprocess.run(
            [sys.executable, "-m", "tinyjobs", "check", "--socket", sup.socket_path, "--json"],
            env={k: v for k, v in harness.env().items() if k != "TINYJOBS_URL"},
            capture_output=True,
            text=True,
            timeout=30,
        )
        findings = {f["setting"]: f for f in json.loads(checked.stdout)["findings"]}
        assert findings["supervisor.store"]["status"] in ("WARN", "PASS"), findings  # PASS: back already
        assert checked.returncode == 0, checked.stdout + checked.stderr
        # Down long enough for every worker to notice (they retry for a second first).
        wait_until(
            lambda: {e["pid"] for e in sup.event("store.unreachable")} >= {sup.pid, *workers},
            timeout=15,
            what="every process to log store.unreachable",
        )
        restart()

        assert enqueuer.wait(90) == 0, stderr_path.read_text()
        acked = acked_ids(acked_path)
        assert len(acked) == JOBS
        store = open_store(url)
        try:

            def all_done() -> bool:
                return store.counts().get("default", {}).get("done", 0) == JOBS

            try:
                wait_until(all_done, timeout=60, interval=0.2, what=f"all {JOBS} jobs done")
            except AssertionError as err:  # say which jobs did not finish, and how they stand
                jobs = [store.get(i, executions=True) for i in acked]
                left = [job for job in jobs if job is None or job.state != "done"]
                raise AssertionError(f"{err}: {store.counts()}; not done: {left[:5]!r}") from None
            missing = [i for i in acked if store.get(i) is None]
            assert missing == [], f"{len(missing)} acknowledged jobs lost, e.g. {missing[:5]}"
        finally:
            store.close()
        up = wait_until(
            lambda: (doc := sup.try_health()) and doc["healthy"] and doc,
            timeout=15,
            what="health to say healthy again",
        )
        assert up["store"] == {"reachable": True, "error": None, "since": None}
        assert up["status"] == "healthy"

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


@pytest.mark.slow
def test_an_outage_longer_than_the_lease_loses_nothing_and_counts_nothing_twice(harness, tmp_path):
    """PostgreSQL away for longer than the lease of the jobs running at the time. Their handlers
    finish during the outage; their holders keep the settlements and send them when it is back.
    In the store's time the leases ran out: a settlement that arrives before the reaper ends the
    lease still lands (the attempt did finish, nobody else holds the job); once the reaper ended
    it, the job runs again as its next attempt and the late settlement changes nothing (JOB-05).
    Either way: every job done once, none lost, no two runs at once."""
    with postgres_server(tmp_path, {"fsync": "on"}) as pg:
        url = pg.url + "?schema=outage"
        sup = harness.start("--workers", "2", env=harness.env(TINYJOBS_URL=url, TJ_LEASE="3s"))
        sup.wait_ready(2)
        store = open_store(url)
        try:
            jobs = [f"h{n}" for n in range(8)]
            for job_id in jobs:
                store.enqueue([_new_job(job_id, seconds=1.5)])
            wait_until(lambda: len(harness.starts()) == len(jobs), timeout=20, what="every job to start")
            pg.stop("immediate")
            stopped = time.monotonic()
            wait_until(
                lambda: len(harness.marks_of("end")) == len(jobs),
                timeout=20,
                what="the handlers to finish while the store is away",
            )
            # The outage lasts past the 3 s lease (the point of the test, not a wait for a state).
            time.sleep(max(0.0, 6.0 - (time.monotonic() - stopped)))
            pg.start()
            wait_until(
                lambda: store.counts().get("default", {}).get("done", 0) == len(jobs),
                timeout=60,
                interval=0.2,
                what="every job done",
            )
            for job_id in jobs:
                job = store.get(job_id, executions=True)
                done_runs = [e for e in job.executions if e.outcome == "done"]
                assert job.state == "done" and len(done_runs) == 1, (job_id, job.executions)
                assert job.attempts in (1, 2), job
            assert overlapping_runs(harness.marks()) == []
            assert sup.proc.poll() is None and sup.event("worker.exited") == []
        finally:
            store.close()
        sup.signal(signal.SIGTERM)
        assert sup.wait_exit(30) == 0


def _new_job(job_id: str, seconds: float) -> NewJob:
    return NewJob(job_id, "hold", payload=json.dumps({"seconds": seconds}), max_attempts=5)
