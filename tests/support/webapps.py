"""Framework examples served by their real servers in a child process, and plain HTTP calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """(status, JSON body or text) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        status, text = err.code, err.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


@contextmanager
def served(command: Sequence[str], port: int, env: dict[str, str], log: Path) -> Iterator[str]:
    """Start `command` (run from the repository root) and yield its base URL once it answers
    HTTP; SIGTERM at the end, and the server must exit within 20 s."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, *command],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"{command} exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(base + "/health", timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{command} did not answer within 60 s: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{command} did not stop on SIGTERM: {log.read_text()[-2000:]}") from None
