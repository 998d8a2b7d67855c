"""Real `tinyjobs worker` processes for process tests, each logging to a file of its own (a pipe
nobody reads would fill up and stall a worker), and the marks their handlers leave."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import tinyjobs


class WorkerProcesses:
    """Starts `tinyjobs worker --app APP` on a SQLite file in `tmp`, with `tmp` as $TJ_TEST_DIR
    (where the test apps write their marks) and the app module's folder importable."""

    def __init__(self, tmp: Path, app_spec: str, app_dir: Path, marks_file: str = "marks.jsonl") -> None:
        self.tmp, self.app_spec, self.app_dir = tmp, app_spec, app_dir
        self.url = f"sqlite:///{tmp}/jobs.db"
        self.marks_path = tmp / marks_file
        self.env: dict[str, str] = {}  # extra environment for the next workers started
        self.procs: list[subprocess.Popen] = []

    def start(self, *extra: str) -> subprocess.Popen:
        env = {
            **os.environ,
            "TINYJOBS_URL": self.url,
            "TJ_TEST_DIR": str(self.tmp),
            "PYTHONPATH": os.pathsep.join([str(self.app_dir), os.environ.get("PYTHONPATH", "")]),
            **self.env,
        }
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "w")  # the child keeps a copy
        command = [sys.executable, "-m", "tinyjobs", "worker", "--app", self.app_spec, *extra]
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def marks(self, kind: str | None = None) -> list[dict]:
        """The handlers' marks (one JSON object a line), optionally of one kind."""
        lines = self.marks_path.read_text().splitlines() if self.marks_path.exists() else []
        return [m for m in map(json.loads, filter(None, lines)) if kind is None or m["kind"] == kind]

    def events(self, name: str) -> list[dict]:
        """Log events called `name` from every worker's log."""
        found = []
        for path in sorted(self.tmp.glob("worker-*.log")):
            for line in path.read_text().splitlines():
                if line.startswith("{") and json.loads(line).get("event") == name:
                    found.append(json.loads(line))
        return found

    def stop(self, proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.wait(30)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)


def import_app(module_name: str, app_dir: Path, url: str) -> tinyjobs.App:
    """The `app` of a test app module, pointed at `url` (its store opened afresh)."""
    sys.path.insert(0, str(app_dir))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(str(app_dir))
    module.app.url, module.app._store = url, None
    return module.app


def runs_again_after_worker_lost(
    workers: WorkerProcesses, app: tinyjobs.App, job_id: str, first: subprocess.Popen
) -> None:
    """`first` was SIGKILLed while it ran `job_id` (procapp's marks): a second worker started
    now ends the dead holder's lease at once (DUR-02), long before it would run out, and runs
    the job as its second attempt; the first attempt is on record as 'worker lost'."""
    from support.wait import wait_until

    second = workers.start()
    wait_until(
        lambda: [m["attempt"] for m in workers.marks("start") if m["job"] == job_id] == [1, 2],
        timeout=15,
        what="the second attempt to start",
    )
    again = app.get(job_id)
    assert again.attempts == 2
    assert [e.outcome for e in again.executions] == ["worker lost", None]
    assert again.executions[0].pid == first.pid and again.executions[1].pid == second.pid
