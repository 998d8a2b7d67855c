"""sd_notify in plain Python: datagrams read from a fake $NOTIFY_SOCKET, path and abstract."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from tinyjobs.supervisor.notify import Notifier


def listen(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address.replace("@", "\0", 1) if address.startswith("@") else address)
    sock.settimeout(5)
    return sock


def read(sock: socket.socket) -> dict[str, str]:
    return dict(line.split("=", 1) for line in sock.recv(4096).decode().splitlines())


@pytest.fixture(params=["path", "abstract"])
def address(request, tmp_path):
    if request.param == "path":
        return str(tmp_path / "notify.sock")
    return f"@tinyjobs-test-{uuid.uuid4().hex}"


def test_ready_status_and_stopping_reach_the_socket(address):
    sock = listen(address)
    env = {"NOTIFY_SOCKET": address}
    notifier = Notifier.from_environment(env)
    notifier.ready("running: 2/2 workers")
    assert read(sock) == {"READY": "1", "STATUS": "running: 2/2 workers", "MAINPID": str(os.getpid())}
    notifier.status("running: 1/2 workers")
    assert read(sock) == {"STATUS": "running: 1/2 workers"}
    notifier.stopping("draining", extend=35)
    assert read(sock) == {"STOPPING": "1", "STATUS": "draining", "EXTEND_TIMEOUT_USEC": "35000000"}
    sock.close()


def test_the_variables_are_removed_so_children_do_not_inherit_them(address):
    env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}
    Notifier.from_environment(env)
    assert env == {}


def test_watchdog_only_when_asked_and_only_for_this_pid(address):
    sock = listen(address)
    assert Notifier.from_environment({"NOTIFY_SOCKET": address}).watchdog() is None
    other = Notifier.from_environment(
        {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}
    )
    assert other.watchdog() is None
    mine = Notifier.from_environment(
        {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}
    )
    assert mine.watchdog(now=100.0) == pytest.approx(1.0)  # every half interval
    assert read(sock) == {"WATCHDOG": "1"}
    mine.watchdog(now=100.5)  # not due yet: nothing sent
    mine.watchdog(now=101.0)
    assert read(sock) == {"WATCHDOG": "1"}
    sock.close()


def test_without_systemd_nothing_is_sent_and_nothing_fails(tmp_path):
    assert Notifier.from_environment({}).send(READY=1) is False
    gone = Notifier.from_environment({"NOTIFY_SOCKET": str(tmp_path / "nobody.sock")})
    assert gone.send(READY=1) is False
