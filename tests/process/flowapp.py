"""The app that the flow-control process tests run in real `tinyjobs worker` processes.
Handlers append start and end lines to $TJ_TEST_DIR/flow.jsonl, so that a test counts
overlapping runs from the handlers' own records. Cron schedules are registered only when
$TJ_FLOW_CRON names them, so that the limit tests run without cron traffic. With $TJ_FLOW_CLOCK
set, the app's clock is the time written in that file, which the test moves."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import tinyjobs


class FileClock:
    """The time written in a file: one clock the test moves for every worker process at once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def now(self) -> float:
        return float(self.path.read_text())


_CLOCK = os.environ.get("TJ_FLOW_CLOCK")
app = tinyjobs.App(clock=FileClock(Path(_CLOCK)) if _CLOCK else None)  # $TINYJOBS_URL, set by the test
app.queue("capped", concurrency=3, lease="5s")
app.queue("grouped", group_concurrency=1, lease="5s")
app.queue("rated", rate="5/s", lease="5s")
app.queue("group_rated", group_rate="2/s", lease="5s")
MARKS = Path(os.environ.get("TJ_TEST_DIR", "."))


def mark(kind: str, run: tinyjobs.Run, **fields) -> None:
    """Append one line; O_APPEND keeps lines of several processes whole."""
    line = json.dumps(
        {
            "kind": kind,
            "job": run.id,
            "queue": run.job.queue,
            "group": run.job.group,
            "claimed": run.job.started_at,  # the claim's time, on the store's clock
            "pid": os.getpid(),
            "t": time.time(),
            **fields,
        }
    )
    with open(MARKS / "flow.jsonl", "a") as handle:
        handle.write(line + "\n")


def _hold(run: tinyjobs.Run, seconds: float) -> None:
    mark("start", run)
    time.sleep(seconds)
    mark("end", run)


@app.task(queue="capped", attempts=1)
def capped(run: tinyjobs.Run, seconds: float) -> None:
    _hold(run, seconds)


@app.task(queue="grouped", attempts=1)
def grouped(run: tinyjobs.Run, seconds: float) -> None:
    _hold(run, seconds)


@app.task(queue="rated", attempts=1)
def rated(run: tinyjobs.Run, seconds: float) -> None:
    _hold(run, seconds)


@app.task(queue="group_rated", attempts=1)
def group_rated(run: tinyjobs.Run, seconds: float) -> None:
    _hold(run, seconds)


@app.task(attempts=1)
def noop(run: tinyjobs.Run) -> None:
    """For the benchmark: nothing at all."""


def _due_mark(run: tinyjobs.Run) -> None:
    mark("cron", run, due=run.due.timestamp())


_CRONS = set(filter(None, os.environ.get("TJ_FLOW_CRON", "").split(",")))
if "each_second" in _CRONS:
    app.cron("* * * * * *", name="each_second")(_due_mark)
if "every_five" in _CRONS:
    app.cron("* * * * * */5", name="every_five")(_due_mark)
