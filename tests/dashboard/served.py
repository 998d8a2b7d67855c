"""`tinyjobs dashboard` as a real process: started on a free port, its address read from the
first line it prints, stopped by a real signal."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any


class Served:
    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        command = [sys.executable, "-m", "tinyjobs", *args]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        self.address = self._first_line(timeout=30)

    def _first_line(self, timeout: float) -> str:
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                line = self.proc.stdout.readline()
                if line:
                    return line.strip()
            if self.proc.poll() is not None:
                raise AssertionError(f"dashboard exited {self.proc.returncode}: {self.proc.stderr.read()}")
        self.proc.kill()
        raise AssertionError("the dashboard printed no address within the deadline")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc.stderr.close()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop(signal.SIGKILL)


def http(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()
