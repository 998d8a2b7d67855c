"""tinyjobs.testing: an app whose module fixed a production URL, swapped onto memory:// with a
FakeClock for one test; jobs drained and run in-line by the worker's own code; the README's
"Testing your own tasks" example is the file CI runs."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tinyjobs
from tinyjobs.testing import swapped

ROOT = Path(__file__).resolve().parents[2]


def production_app() -> tinyjobs.App:
    return tinyjobs.App("postgresql://app:secret@db.invalid/app")  # unreachable on purpose


def test_the_swap_never_opens_the_production_store_and_restores_the_app():
    app = production_app()
    clock = app.clock

    @app.task
    def ping(run, n):
        return n

    with swapped(app) as jobs:
        ping.enqueue(n=1)
        assert asyncio.run(ping.aenqueue(n=2)).created  # the async path lands there too
        assert [j.args["n"] for j in jobs.enqueued(ping)] == [1, 2]
        assert jobs.drain() == 2
    assert (app._store, app.clock, app.url) == (None, clock, "postgresql://app:secret@db.invalid/app")


def test_delays_and_backoff_follow_the_moved_clock():
    app = production_app()
    calls = []

    @app.task(attempts=3)
    def flaky(run, n):
        calls.append(run.step("fetch", lambda: len(calls)))
        if run.attempt < 2:
            raise RuntimeError("down")
        return {"fetched": calls[-1]}

    with swapped(app) as jobs:
        first = jobs.run(flaky, n=1)
        assert (first.state, first.attempts, "down" in first.error) == ("scheduled", 1, True)
        with pytest.raises(tinyjobs.ConfigError, match="not due"):
            jobs.run_job(first.id)
        assert jobs.drain() == 0
        jobs.advance("2s")  # past the first backoff (1 s +-10 %)
        again = jobs.run_job(first.id)
        assert (again.state, again.attempts, again.result) == ("done", 2, {"fetched": 0})
        assert calls == [0, 0]  # the step's value came back; its function ran once


def test_assert_enqueued_names_what_was_enqueued():
    app = production_app()

    @app.task
    def mail(run, to):
        return None

    with swapped(app) as jobs:
        mail.enqueue(to="ann")
        assert jobs.assert_enqueued(mail, to="ann").args == {"to": "ann"}
        with pytest.raises(AssertionError, match=r"found 0 in \[\{'to': 'ann'\}\]"):
            jobs.assert_enqueued(mail, to="bob")


def test_the_readme_shows_the_example_that_ci_runs():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Testing your own tasks", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks and blocks[0] == (ROOT / "examples/test_shop.py").read_text()
    env = {k: v for k, v in os.environ.items() if k != "TINYJOBS_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples/test_shop.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
