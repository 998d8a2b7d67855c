"""The app the benchmarks run: a no-op task and one that reports when it started."""

from __future__ import annotations

import time

import tinyjobs

app = tinyjobs.App()  # the URL comes from $TINYJOBS_URL, set by benchmarks/run.py


@app.task
def noop(run: tinyjobs.Run, n: int) -> None:
    return None


@app.task
def stamp(run: tinyjobs.Run, sent: float) -> float:
    """The handler's start time; the benchmark subtracts the enqueue time."""
    return time.time()
