"""Serving the dashboard with waitress (a pure-Python production WSGI server) until SIGTERM or
Ctrl-C, for `tinyjobs dashboard`."""

from __future__ import annotations

import ipaddress
import signal
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any

THREADS = 8


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def address(host: str, port: int, prefix: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{prefix}/"


def serve(wsgi_app: Any, host: str, port: int, on_ready: Callable[[int], None]) -> None:
    """Listen on host:port (port 0: any free port), call `on_ready(port)` once listening, and
    serve until SIGTERM or SIGINT, then close the socket and return."""
    from waitress.server import create_server

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = create_server(
        wsgi_app,
        host=host.strip("[]"),
        port=port,
        threads=THREADS,
        ipv4=family == socket.AF_INET,
        ipv6=family == socket.AF_INET6,
        ident="tinyjobs",
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        # waitress's loop ends on SystemExit and shuts its threads down.
        raise SystemExit(0)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        on_ready(server.effective_port)
        server.run()
    finally:
        server.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
