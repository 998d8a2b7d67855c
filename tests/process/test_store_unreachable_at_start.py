"""The store is not there yet when tinyjobs starts (issue 17): a boot order where Redis or
PostgreSQL comes up after the service, a server restarting. A redis-server of the test's own is
given a port but started only later.

`tinyjobs supervise` starts, forks no worker and sends no READY=1 until the store answers,
retries with backoff, says why in its health document and STATUS=, logs the outage once and its
end once, then becomes ready by itself. `tinyjobs worker` likewise waits instead of exiting."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import supervisor_harness
from support.processes import import_app
from support.servers import RedisServer
from support.wait import wait_until
from test_supervisor_systemd import Datagrams

harness = supervisor_harness.harness  # fixture
HERE = Path(__file__).resolve().parent


@pytest.fixture
def late_redis(tmp_path):
    """A redis-server with a port and a directory, not started: the test starts it."""
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory, ["--appendonly", "yes"])
    yield server
    server.stop(signal.SIGKILL)


@pytest.mark.slow
def test_supervise_waits_for_its_store_without_ready_and_says_why(harness, late_redis, tmp_path):
    address = str(tmp_path / "notify.sock")
    notes = Datagrams(address)
    url = late_redis.url + "?prefix=late"
    sup = harness.start("--workers", "1", env=harness.env(TINYJOBS_URL=url, NOTIFY_SOCKET=address))
    doc = wait_until(
        lambda: (d := sup.try_health()) and d["uptime"] > 3.0 and d,
        timeout=20,
        what="the supervisor to wait a few seconds for its store",
    )
    assert doc["healthy"] is False and doc["workers"] == []
    assert doc["store"]["reachable"] is False and "unreachable" in doc["store"]["error"]
    assert any(p.startswith("store unreachable") for p in doc["problems"])
    messages = notes.messages()
    assert not any(m.get("READY") == "1" for m in messages), messages
    assert any("store unreachable" in m.get("STATUS", "") for m in messages), messages
    assert sup.child_pids() == []
    assert len(sup.event("store.unreachable")) == 1, "one line for the outage, not one per retry"

    late_redis.start()
    wait_until(lambda: any(m.get("READY") == "1" for m in notes.messages()), timeout=30, what="READY=1")
    sup.wait_ready(1)
    assert len(sup.event("store.unreachable")) == 1 and len(sup.event("store.reachable")) == 1
    assert sup.event("supervisor.store_ready")
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0


@pytest.mark.slow
def test_a_worker_waits_for_its_store_then_works(workers, late_redis):
    workers.url = late_redis.url + "?prefix=late"
    proc = workers.start()
    wait_until(lambda: workers.events("store.unreachable"), timeout=20, what="the worker to say it waits")
    assert proc.poll() is None, "the worker exited instead of waiting for its store"

    late_redis.start()
    wait_until(lambda: workers.events("store.reachable"), timeout=30, what="the worker to find its store")
    app = import_app("procapp", HERE, workers.url)
    try:
        job = app.tasks["record"].enqueue(n=1)
        wait_until(lambda: (j := app.get(job.id)) and j.state == "done", timeout=20, what="the job done")
    finally:
        app.close()
    assert len(workers.events("store.unreachable")) == 1
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
