"""A Redis worker SIGKILLed in the middle of a job that an enqueue handed over to it (the lone
job's path at a low rate): the attempt is on record ('worker lost'), and the job runs again as
its next attempt on another worker. Real `tinyjobs worker` processes, real signals."""

from __future__ import annotations

import secrets
import signal
from pathlib import Path

from support.processes import WorkerProcesses, import_app, runs_again_after_worker_lost
from support.wait import wait_until

from tinyjobs.urls import with_query

APPS = Path(__file__).resolve().parent.parent / "process"


def test_a_worker_killed_mid_job_handed_over_to_it_leaves_its_attempt_on_record(redis_url, tmp_path):
    workers = WorkerProcesses(tmp_path, "procapp:app", APPS)
    workers.url = with_query(redis_url, prefix=f"test-{secrets.token_hex(6)}")
    app = import_app("procapp", APPS, workers.url)
    store = app.store
    try:
        first = workers.start()
        # Registered as a waiting worker (its claim found nothing after it waited): the next
        # single enqueue hands its job over in the enqueue's own step.
        app.enqueue("hold", {"seconds": 0})  # (its queue exists; the worker runs it)
        wait_until(lambda: workers.marks("start"), timeout=15, what="the first job to start")
        wait_until(
            lambda: store._conn.call(lambda c: c.hlen(f"{store.base}:q:short:idle")) > 0,
            timeout=15,
            what="the worker to register for handovers",
        )
        job = app.enqueue("hold", {"seconds": 60})
        wait_until(lambda: len(workers.marks("start")) == 2, timeout=15, what="the handed job to start")
        token = store._conn.call(lambda c: c.hget(f"{store.base}:job:{job.id}", "tk"))
        token = token.decode() if isinstance(token, bytes) else token
        assert token[16:20] == "0000"  # a handed lease's (a claim's count from 0001)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert app.get(job.id).state == "running"
        runs_again_after_worker_lost(workers, app, job.id, first)
    finally:
        workers.stop_all()
        store.drop()
        app.close()
