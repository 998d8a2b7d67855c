"""The app benchmarks/soak.py runs under `tinyjobs supervise`: jobs of mixed kinds. Every start
of a handler is recorded (one JSON line, O_APPEND) in $SOAK_LEDGER, a file outside the store
under test, so that the soak can account for every run."""

from __future__ import annotations

import json
import os
import random
import time

import tinyjobs

app = tinyjobs.App()  # $TINYJOBS_URL
app.queue("default", lease="5s")  # short, so that a killed worker's jobs come back soon
LEDGER = os.environ.get("SOAK_LEDGER", "soak-ledger.jsonl")


def record(run: tinyjobs.Run, kind: str, **fields: object) -> None:
    line = json.dumps(
        {"job": run.id, "attempt": run.attempt, "kind": kind, "pid": os.getpid(), "t": time.time(), **fields}
    )
    with open(LEDGER, "a") as ledger:
        ledger.write(line + "\n")


@app.task(attempts=10)
def fast(run: tinyjobs.Run, n: int) -> int:
    record(run, "fast")
    return n


@app.task(attempts=10)
def slow(run: tinyjobs.Run, n: int, seconds: float) -> int:
    record(run, "slow")
    time.sleep(seconds)
    return n


@app.task(attempts=3)
def failing(run: tinyjobs.Run, n: int) -> object:
    record(run, "failing")
    return run.fail("fails for good, on purpose")


@app.task(attempts=10)
def retrying(run: tinyjobs.Run, n: int) -> int:
    """Raises at its first attempt, succeeds at a later one (1 s backoff)."""
    record(run, "retrying")
    if run.attempt < 2:
        raise RuntimeError("first attempt fails, on purpose")
    return n


@app.task(attempts=10)
def stepped(run: tinyjobs.Run, n: int) -> int:
    """Two steps: a later attempt gets their values back without calling them again."""
    a = run.step("a", lambda: random.randint(1, 1000))
    record(run, "stepped", a=a)
    b = run.step("b", lambda: a + 1)
    return b


@app.task(attempts=10)
def child(run: tinyjobs.Run, n: int) -> int:
    """Enqueued `after` a fast job: runs once it succeeded."""
    record(run, "child")
    return n


@app.cron("* * * * * */2")  # every 2 s (croniter's sixth field is the second)
def tick(run: tinyjobs.Run) -> None:
    record(run, "tick", due=run.due.isoformat())
