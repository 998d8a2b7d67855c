"""A Redis worker that stops (SIGTERM) gives back what the store handed it and it did not start,
and is handed nothing more: its registrations as a waiting worker go as it stops
(RedisStore.give_back_unstarted, called by the worker at stop), not IDLE_FOR seconds later.
Real `tinyjobs worker` processes, real signals."""

from __future__ import annotations

import secrets
import signal
from pathlib import Path

from support.processes import WorkerProcesses, import_app
from support.wait import wait_until

from tinyjobs.urls import with_query

APPS = Path(__file__).resolve().parent.parent / "process"


def test_a_worker_that_stops_leaves_no_registration_and_gets_no_handover(redis_url, tmp_path):
    workers = WorkerProcesses(tmp_path, "procapp:app", APPS)
    workers.url = with_query(redis_url, prefix=f"test-{secrets.token_hex(6)}")
    app = import_app("procapp", APPS, workers.url)
    store = app.store
    idle = f"{store.base}:q:short:idle"
    try:
        first = workers.start()
        app.enqueue("hold", {"seconds": 0})  # (its queue exists; the worker runs it)
        wait_until(lambda: workers.marks("start"), timeout=15, what="the first job to start")
        wait_until(lambda: store._conn.call(lambda c: c.hlen(idle)) > 0, timeout=15, what="a registration")
        first.send_signal(signal.SIGTERM)
        assert first.wait(15) is not None
        assert store._conn.call(lambda c: c.hlen(idle)) == 0  # gone with the worker, not 10 s later
        job = app.enqueue("hold", {"seconds": 0})
        assert app.get(job.id).state == "waiting"  # handed to nobody
    finally:
        workers.stop_all()
        store.drop()
        app.close()
