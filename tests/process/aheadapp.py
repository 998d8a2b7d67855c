"""The app that the claim-ahead process tests run in real `tinyjobs worker` processes: `tick`,
a job that is over at once (the jobs a worker claims ahead of its free slots), and `hold`,
one that holds its slot. Handlers append their starts to $TJ_TEST_DIR/marks.jsonl. With
$TJ_TEST_HOLD_FOR set, the worker holds a job claimed ahead that long before handing it back
(tinyjobs.ahead.HOLD_FOR), so that a test can act while jobs are held."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import tinyjobs
import tinyjobs.ahead

if os.environ.get("TJ_TEST_HOLD_FOR"):
    tinyjobs.ahead.HOLD_FOR = float(os.environ["TJ_TEST_HOLD_FOR"])

app = tinyjobs.App()  # $TINYJOBS_URL, set by the test
app.queue("work", lease="3s")
MARKS = Path(os.environ.get("TJ_TEST_DIR", "."))


def mark(kind: str, **fields: object) -> None:
    line = json.dumps({"kind": kind, "pid": os.getpid(), "t": time.time(), **fields})
    with open(MARKS / "marks.jsonl", "a") as handle:  # O_APPEND: lines from processes do not mix
        handle.write(line + "\n")


@app.task(queue="work")
def tick(run: tinyjobs.Run) -> None:
    """Over at once."""
    mark("start", job=run.id, attempt=run.attempt)


@app.task(queue="work")
def hold(run: tinyjobs.Run, seconds: float) -> None:
    """Hold a slot for `seconds`."""
    mark("start", job=run.id, attempt=run.attempt)
    time.sleep(seconds)
