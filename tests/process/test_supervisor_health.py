"""SUP-09: the health socket answers one JSON document per connection, mode 0660, no secrets,
and neither a garbage-sending nor a silent, never-reading client holds up the loop."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time

import supervisor_harness
from support.wait import wait_until

from tinyjobs.supervisor.health import query

harness, app = supervisor_harness.harness, supervisor_harness.app  # fixtures


def test_sup09_the_document_has_every_field_and_the_socket_is_0660(harness):
    secret_url = f"sqlite:///{harness.dir}/jobs.db"
    sup = harness.start("--workers", "2", env=harness.env(TINYJOBS_URL=secret_url))
    pids = sup.wait_ready(2)
    assert stat.S_IMODE(os.stat(sup.socket_path).st_mode) == 0o660
    doc = sup.health()
    assert doc["pid"] == sup.pid and doc["uptime"] > 0 and doc["state"] == "running"
    assert sorted(w["pid"] for w in doc["workers"]) == sorted(pids)
    for worker in doc["workers"]:
        assert {"pid", "state", "jobs", "last_heartbeat"} <= set(worker)
        assert worker["last_heartbeat"] < 5
    assert doc["store"] == {"reachable": True, "error": None, "since": None}
    assert doc["leader"] is True and doc["last_reap"] is not None
    assert "last_cron_tick" in doc
    assert doc["healthy"] is True and doc["problems"] == []


def test_sup09_the_url_password_never_appears(harness):
    # A redis URL with a password that the supervisor cannot reach: health says why, masked.
    url = "redis://:s3cret-pw@127.0.0.1:1/0"
    sup = harness.start("--workers", "1", env=harness.env(TINYJOBS_URL=url))
    doc = wait_until(sup.try_health, timeout=15, what="the health socket")
    assert doc["store"]["reachable"] is False and doc["healthy"] is False
    assert "s3cret-pw" not in str(doc) and "***" in doc["url"]
    assert "s3cret-pw" not in sup.log_path.read_text()


def test_sup09_garbage_and_silent_clients_do_not_block_the_loop(harness):
    sup = harness.start("--workers", "1")
    sup.wait_ready(1)
    silent = []
    for _ in range(10):  # connect, never read, never close
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(sup.socket_path)
        silent.append(client)
    garbage = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    garbage.connect(sup.socket_path)
    garbage.setblocking(False)
    try:
        garbage.send(os.urandom(200_000))
    except BlockingIOError:
        pass
    try:
        began = time.monotonic()
        doc = query(sup.socket_path, timeout=5)
        assert time.monotonic() - began < 3, "answered while the other clients wait"
        assert doc["workers"][0]["last_heartbeat"] < 5, "the loop kept reading heartbeats"
    finally:
        for client in [*silent, garbage]:
            client.close()
    assert sup.proc.poll() is None


def test_check_with_socket_exits_0_when_healthy_and_2_when_nothing_answers(harness):
    sup = harness.start("--workers", "1")
    sup.wait_ready(1)
    command = [sys.executable, "-m", "tinyjobs", "check", harness.url, "--socket", sup.socket_path]
    healthy = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60)
    report = json.loads(healthy.stdout)
    by_setting = {f["setting"]: f["status"] for f in report["findings"]}
    assert by_setting["supervisor.workers"] == "PASS" and by_setting["supervisor.store"] == "PASS"
    assert healthy.returncode == 0, healthy.stdout
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.proc.wait(30) == 0
    gone = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert gone.returncode == 2 and "no supervisor answers" in gone.stdout + gone.stderr
