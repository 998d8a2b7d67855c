"""Process tests: real `tinyjobs worker` processes on a real SQLite file, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


class Workers:
    """Starts `tinyjobs worker` processes for tests/process/procapp.py and cleans up."""

    def __init__(self, url: str, marks: Path) -> None:
        self.url, self.marks, self.procs = url, marks, []

    def start(self, *extra: str) -> subprocess.Popen:
        env = {
            **os.environ,
            "TINYJOBS_URL": self.url,
            "TJ_TEST_DIR": str(self.marks),
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        # Logs go to a file: a pipe nobody reads would fill up and block the worker.
        log = open(self.marks / f"worker-{len(self.procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "tinyjobs", "worker", "--app", "procapp:app", *extra],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def read_marks(self) -> list[dict]:
        path = self.marks / "marks.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def workers(tmp_path):
    ws = Workers(f"sqlite:///{tmp_path}/jobs.db", tmp_path)
    yield ws
    ws.stop_all()


@pytest.fixture
def app(workers):
    sys.path.insert(0, str(HERE))
    try:
        import procapp
    finally:
        sys.path.remove(str(HERE))
    procapp.app.url, procapp.app._store = workers.url, None
    yield procapp.app
    procapp.app.close()
