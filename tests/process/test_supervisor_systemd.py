"""SUP-10 and Logs: sd_notify datagrams read from a fake $NOTIFY_SOCKET (path and abstract),
journald's native protocol read from a fake journal socket, and `systemd-analyze verify` of
the unit that users copy."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
import supervisor_harness
from support.wait import wait_until

harness, app = supervisor_harness.harness, supervisor_harness.app  # fixtures
REPO = Path(__file__).resolve().parents[2]


class Datagrams:
    """A bound AF_UNIX datagram socket that collects what arrives."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address.replace("@", "\0", 1) if address.startswith("@") else address)
        self.sock.setblocking(False)
        self.received: list[bytes] = []

    def collect(self) -> list[bytes]:
        while True:
            try:
                self.received.append(self.sock.recv(1 << 20))
            except BlockingIOError:
                return self.received

    def messages(self) -> list[dict[str, str]]:
        return [
            dict(line.split("=", 1) for line in d.decode().splitlines() if "=" in line)
            for d in self.collect()
        ]


@pytest.mark.parametrize("kind", ["path", "abstract"])
def test_sup10_ready_status_watchdog_and_stopping_reach_notify_socket(harness, app, kind):
    address = str(harness.dir / "notify.sock") if kind == "path" else f"@tj-{uuid.uuid4().hex}"
    notify = Datagrams(address)
    env = harness.env(NOTIFY_SOCKET=address, WATCHDOG_USEC="400000")
    sup = harness.start("--workers", "2", "--drain-timeout", "5s", env=env)
    ready = wait_until(
        lambda: [m for m in notify.messages() if m.get("READY") == "1"], timeout=20, what="READY=1"
    )
    assert "2/2 workers" in ready[0]["STATUS"] and ready[0]["MAINPID"] == str(sup.pid)
    wait_until(
        lambda: sum(m.get("WATCHDOG") == "1" for m in notify.messages()) >= 3,
        timeout=10,
        what="watchdog keep-alives every half interval",
    )
    job = app.enqueue("environment", {})
    seen = wait_until(lambda: harness.marks_of("environment"), timeout=15, what="the job")
    assert seen[0]["seen"] == [], "job code does not inherit NOTIFY_SOCKET or WATCHDOG_*"
    # The mark is written by the handler, before its worker settles the job: wait for that.
    wait_until(lambda: app.get(job.id).state == "done", timeout=15, what="the job settled")
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0
    stopping = [m for m in notify.messages() if m.get("STOPPING") == "1"]
    assert stopping and int(stopping[0]["EXTEND_TIMEOUT_USEC"]) > 5_000_000


def test_sup10_without_watchdog_usec_no_watchdog_is_sent(harness):
    address = str(harness.dir / "notify.sock")
    notify = Datagrams(address)
    sup = harness.start("--workers", "1", env=harness.env(NOTIFY_SOCKET=address))
    wait_until(lambda: any(m.get("READY") == "1" for m in notify.messages()), timeout=20, what="READY")
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0
    assert not any("WATCHDOG" in m for m in notify.messages())


def test_logs_go_to_journald_natively_from_the_supervisor_and_every_worker(harness, app):
    journal = Datagrams(str(harness.dir / "journal.sock"))
    out = open(harness.dir / "stdout", "wb")  # the child's stdout
    info = os.fstat(out.fileno())
    env = harness.env(
        JOURNAL_STREAM=f"{info.st_dev}:{info.st_ino}",
        TINYJOBS_JOURNAL_SOCKET=str(harness.dir / "journal.sock"),
    )
    try:
        sup = harness.start("--workers", "2", env=env, stdout=out)
        job = app.enqueue("quick", {"n": 1})

        def entries() -> list[dict[str, str]]:
            return [dict(_fields(d)) for d in journal.collect()]

        done = wait_until(
            lambda: [e for e in entries() if e.get("TINYJOBS_EVENT") == "job.done"],
            timeout=20,
            what="job.done in the journal",
        )
    finally:
        out.close()
    entry = done[0]
    assert entry["TINYJOBS_JOB_ID"] == job.id and entry["TINYJOBS_TASK"] == "quick"
    assert entry["TINYJOBS_QUEUE"] == "default" and entry["TINYJOBS_ATTEMPT"] == "1"
    assert entry["PRIORITY"] == "6" and entry["SYSLOG_IDENTIFIER"] == "tinyjobs"
    assert entry["TINYJOBS_PID"] != str(sup.pid), "a forked worker logs to the journal too"
    events = {e.get("TINYJOBS_EVENT") for e in entries()}
    assert {"supervisor.starting", "worker.spawned", "worker.started"} <= events
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(30) == 0
    assert b"job.done" not in (harness.dir / "stdout").read_bytes()


def _fields(datagram: bytes):
    for line in datagram.split(b"\n"):
        if b"=" in line:
            key, _, value = line.partition(b"=")
            yield key.decode(), value.decode(errors="replace")


def test_the_unit_passes_systemd_analyze_verify(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("systemd-analyze is missing (.ci/run installs systemd)")
        pytest.skip("systemd-analyze is not installed")
    executable = shutil.which("tinyjobs")
    assert executable, "the tinyjobs console script is installed"
    unit = (REPO / "systemd" / "tinyjobs.service").read_text()
    unit = unit.replace("/srv/app/.venv/bin/tinyjobs", executable)
    unit = unit.replace("WorkingDirectory=/srv/app", f"WorkingDirectory={tmp_path}")
    (tmp_path / "tinyjobs.service").write_text(unit)
    dropins = tmp_path / "tinyjobs.service.d"
    dropins.mkdir()
    example = REPO / "systemd" / "tinyjobs.service.d" / "hardening.conf.example"
    shutil.copy(example, dropins / "hardening.conf")
    result = subprocess.run(
        [tool, "verify", str(tmp_path / "tinyjobs.service")],
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Unknown" not in result.stderr and "tinyjobs.service" not in result.stderr, result.stderr
