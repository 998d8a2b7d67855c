"""DUR-01: a job that enqueue acknowledged survives a crash of the process that enqueued it."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import tinyjobs

ENQUEUER = """
import sys, tinyjobs
app = tinyjobs.App(sys.argv[1])
n = 0
while True:
    job = app.enqueue("ledger", {"n": n}, id=f"job:{n}")
    print(job.id, flush=True)  # printed only after enqueue acknowledged it
    n += 1
"""


def acknowledged_then_killed(url: str, after: int) -> list[str]:
    """Run the enqueuer, SIGKILL it once it acknowledged `after` jobs; every id it printed."""
    proc = subprocess.Popen([sys.executable, "-c", ENQUEUER, url], stdout=subprocess.PIPE, text=True)
    ids, deadline = [], time.monotonic() + 30
    while len(ids) < after and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        ids.append(line.strip())
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=10)
    return ids + rest.split()


def test_dur01_every_acknowledged_enqueue_survives_sigkill_of_the_enqueuer(tmp_path):
    for round_ in range(5):
        path = tmp_path / f"round{round_}.db"
        ids = acknowledged_then_killed(f"sqlite:///{path}", after=20 + round_ * 7)  # a new moment each time
        assert len(ids) >= 20
        app = tinyjobs.App(f"sqlite:///{path}")
        missing = [job_id for job_id in ids if app.get(job_id) is None]
        app.close()
        assert missing == [], f"acknowledged but lost: {missing[:5]}"
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
