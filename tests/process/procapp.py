"""The app that process tests run in real worker processes. Handlers leave their marks in
$TJ_TEST_DIR so that the test can see what ran, where, and when."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import tinyjobs

app = tinyjobs.App()  # $TINYJOBS_URL, set by the test
app.queue("short", lease="3s")
MARKS = Path(os.environ.get("TJ_TEST_DIR", "."))


def mark(kind: str, **fields) -> None:
    line = json.dumps({"kind": kind, "pid": os.getpid(), "t": time.time(), **fields})
    with open(MARKS / "marks.jsonl", "a") as handle:  # O_APPEND: lines from processes do not mix
        handle.write(line + "\n")


@app.task(queue="short", attempts=5)
def hold(run: tinyjobs.Run, seconds: float) -> str:
    """Start, then hold the job for `seconds` (long enough to be killed)."""
    mark("start", job=run.id, attempt=run.attempt)
    time.sleep(seconds)
    mark("end", job=run.id, attempt=run.attempt)
    return "held"


@app.task(queue="short", attempts=3)
def crash(run: tinyjobs.Run) -> None:
    """Kill the whole process on every attempt."""
    mark("start", job=run.id, attempt=run.attempt)
    os._exit(13)


@app.task(attempts=1)
def record(run: tinyjobs.Run, n: int) -> int:
    """Record start and end; a little work in between so that runs could overlap."""
    mark("start", job=run.id, attempt=run.attempt)
    time.sleep(0.002)
    mark("end", job=run.id, attempt=run.attempt)
    return n


@app.task(attempts=3)
def fill(run: tinyjobs.Run, n: int, pad: str) -> int:
    """A job with a large payload (fills a small disk fast); records its run."""
    mark("start", job=run.id, attempt=run.attempt)
    return n
