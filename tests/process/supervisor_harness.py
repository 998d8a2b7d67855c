"""Starting real `tinyjobs supervise` processes for tests/process/test_supervisor_*.py: each on a
SQLite file in tmp_path, its log in a file, its health socket beside it; every wait bounded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.wait import wait_until

from tinyjobs.supervisor.health import query

HERE = Path(__file__).resolve().parent


class Supervisor:
    """One running `tinyjobs supervise`."""

    def __init__(self, proc: subprocess.Popen, socket_path: str | None, log_path: Path) -> None:
        self.proc, self.socket_path, self.log_path = proc, socket_path, log_path
        self.seen_workers: set[int] = set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def health(self, timeout: float = 2.0) -> dict[str, Any]:
        assert self.socket_path
        doc = query(self.socket_path, timeout)
        self.seen_workers.update(w["pid"] for w in doc["workers"])
        return doc

    def try_health(self) -> dict[str, Any] | None:
        try:
            return self.health()
        except (OSError, ValueError):
            return None

    def running_workers(self) -> list[int]:
        doc = self.try_health()
        return [w["pid"] for w in doc["workers"] if w["state"] == "running"] if doc else []

    def wait_ready(self, workers: int, timeout: float = 20.0) -> list[int]:
        return wait_until(
            lambda: (pids := self.running_workers()) and len(pids) >= workers and pids,
            timeout=timeout,
            what=f"{workers} running workers",
        )

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def event(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("event") == name]

    def child_pids(self) -> list[int]:
        try:
            text = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]


class Harness:
    """Starts supervisors for tests/process/supapp.py and cleans every process up."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.url = f"sqlite:///{tmp_path}/jobs.db"
        self.started: list[Supervisor] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM")
        }
        env.update(
            TINYJOBS_URL=self.url,
            TJ_TEST_DIR=str(self.dir),
            PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        )
        env.update(extra)
        return env

    def start(
        self,
        *args: str,
        name: str = "sup",
        socket: bool = True,
        env: dict[str, str] | None = None,
        stdout: Any = None,
    ) -> Supervisor:
        socket_path = str(self.dir / f"{name}.sock") if socket else None
        log_path = self.dir / f"{name}.log"
        command = [sys.executable, "-m", "tinyjobs", "supervise", "--app", "supapp:app"]
        command += ["--socket", socket_path] if socket_path else []
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [*command, *args],
                env=env or self.env(),
                stdout=stdout or log,
                stderr=subprocess.STDOUT if stdout is None else log,
                cwd=self.dir,
            )
        sup = Supervisor(proc, socket_path, log_path)
        self.started.append(sup)
        return sup

    def marks(self) -> list[dict[str, Any]]:
        path = self.dir / "marks.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def starts(self, job_id: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.marks() if m["kind"] == "start" and job_id in (None, m.get("job"))]

    def marks_of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.marks() if m["kind"] == kind]

    def cleanup(self) -> None:
        for sup in self.started:
            pids = set(sup.child_pids()) | sup.seen_workers
            if sup.proc.poll() is None:
                sup.proc.send_signal(signal.SIGKILL)
            sup.proc.wait(10)
            for pid in pids:  # orphans exit by themselves; stopped ones must be ended
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def elapsed_since(t0: float) -> float:
    return time.monotonic() - t0


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.cleanup()


@pytest.fixture
def app(harness):
    """supapp's App on the test's SQLite file, for enqueueing and reading jobs."""
    import supapp

    supapp.app.url, supapp.app._store = harness.url, None
    yield supapp.app
    supapp.app.close()
