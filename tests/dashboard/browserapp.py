"""The app of the browser test: a task that fails until the test "fixes" it (a file appears),
a report task on its own queue, a task whose data is hostile, and a cron schedule."""

from __future__ import annotations

import os
from pathlib import Path

import tinyjobs

app = tinyjobs.App()
app.queue("mail", concurrency=4)

XSS_ARGS = "<script>window.__xss = 'args'</script>"
XSS_ERROR = "<img src=x onerror=\"window.__xss = 'error'\">"


def fixed() -> bool:
    return (Path(os.environ.get("TJ_TEST_DIR", ".")) / "fixed").exists()


@app.task(queue="mail", attempts=1)
def deliver(run: tinyjobs.Run, to: str) -> dict:
    if not fixed():
        raise RuntimeError(f"SMTP server refused {to}: 451 try again later")
    return {"delivered": to}


@app.task(queue="reports")
def report(run: tinyjobs.Run, day: str) -> str:
    return f"report for {day}"


@app.task(queue="mail", attempts=1)
def hostile(run: tinyjobs.Run, note: str) -> None:
    run.step("<b>step</b>", lambda: note)
    raise RuntimeError(XSS_ERROR)


@app.cron("*/15 * * * *")
def sweep(run: tinyjobs.Run) -> None:
    pass
