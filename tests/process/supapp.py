"""The app that the supervisor's process tests run under `tinyjobs supervise`. Handlers leave
marks in $TJ_TEST_DIR/marks.jsonl so that a test sees what ran, in which process, and when.

`CODE_VERSION` is read from $TJ_TEST_DIR/version at import: a reload (SIGHUP) that imports
fresh code shows it in the marks of the jobs that run afterwards."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import tinyjobs

MARKS = Path(os.environ.get("TJ_TEST_DIR", "."))
_version_file = MARKS / "version"
CODE_VERSION = _version_file.read_text().strip() if _version_file.exists() else "1"
if (MARKS / "broken").exists():
    raise RuntimeError("supapp refuses to import (the test asked for a broken app)")

app = tinyjobs.App()  # $TINYJOBS_URL, set by the test
app.queue("default", lease=os.environ.get("TJ_LEASE", "30s"))  # fault tests shorten it
app.queue("limited", lease="30s", timeout="1s")


def mark(kind: str, **fields) -> None:
    line = json.dumps({"kind": kind, "pid": os.getpid(), "ppid": os.getppid(), "t": time.time(), **fields})
    with open(MARKS / "marks.jsonl", "a") as handle:  # O_APPEND: lines from processes do not mix
        handle.write(line + "\n")


@app.task(attempts=5)
def hold(run: tinyjobs.Run, seconds: float) -> str:
    """Start, hold the job for `seconds` (long enough to be killed or drained), end."""
    mark("start", job=run.id, attempt=run.attempt, version=CODE_VERSION)
    time.sleep(seconds)
    mark("end", job=run.id, attempt=run.attempt, version=CODE_VERSION)
    return "held"


@app.task(attempts=3)
def quick(run: tinyjobs.Run, n: int) -> int:
    """A short job that records its run."""
    mark("start", job=run.id, attempt=run.attempt, version=CODE_VERSION)
    time.sleep(0.01)
    mark("end", job=run.id, attempt=run.attempt, version=CODE_VERSION)
    return n


@app.task(queue="limited", attempts=2)
def overrun(run: tinyjobs.Run, seconds: float) -> None:
    """A sync handler past its 1 s timeout: its worker must be recycled (JOB-12)."""
    mark("start", job=run.id, attempt=run.attempt)
    time.sleep(seconds)
    mark("end", job=run.id, attempt=run.attempt)


if os.environ.get("TJ_CRON"):

    @app.cron("* * * * * *")  # every second (croniter's sixth field)
    def tick(run: tinyjobs.Run) -> None:
        mark("tick", job=run.id, due=run.due.isoformat())


@app.task
def environment(run: tinyjobs.Run) -> None:
    """Record which systemd variables job code can see (none: the supervisor unset them)."""
    names = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
    mark("environment", job=run.id, seen=[n for n in names if n in os.environ])
