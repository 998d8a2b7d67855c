"""The SQLite disk-full scenario, run by test_sqlite_faults.py inside a mount namespace of its
own (`unshare -m`, as root): `python fault_diskfull.py MOUNTPOINT OUTDIR`. Prints one JSON line
of what it saw; the test judges it.

A 1 MiB tmpfs at MOUNTPOINT holds the database; a `tinyjobs worker` (in the same namespace)
runs its jobs. Jobs with 2 KB payloads are enqueued until the disk is full; then the tmpfs grows
to 8 MiB (the space returns) and the worker must finish every acknowledged job by itself."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(mountpoint: str, outdir: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mountpoint], check=True)
    url = f"sqlite:///{mountpoint}/jobs.db"
    sys.path.insert(0, str(HERE))
    import procapp

    procapp.app.url, procapp.app._store = url, None
    app = procapp.app
    app.store.counts()  # creates the file before the worker starts
    env = {**os.environ, "TINYJOBS_URL": url, "TJ_TEST_DIR": outdir, "PYTHONPATH": str(HERE)}
    with open(Path(outdir) / "worker-0.log", "w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tinyjobs", "worker", "--app", "procapp:app"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    acked: list[str] = []
    error: BaseException | None = None
    pad = "x" * 2000
    for n in range(5000):
        try:
            acked.append(app.enqueue("fill", {"n": n, "pad": pad}, id=f"d{n}").id)
        except Exception as err:  # the disk is full: the test reads what was raised
            error = err
            break
    # The worker, with jobs in hand or due, finds the disk full too: it waits, saying so once.
    log_path = Path(outdir) / "worker-0.log"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and '"store.unreachable"' not in log_path.read_text():
        time.sleep(0.05)
    subprocess.run(["mount", "-o", "remount,size=8m", mountpoint], check=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        counts = app.store.counts().get("default", {})
        if counts.get("done", 0) >= len(acked):
            break
        time.sleep(0.1)
    after = app.enqueue("fill", {"n": -1, "pad": ""}, id="after").id
    while time.monotonic() < deadline and (job := app.get(after)) is not None and job.state != "done":
        time.sleep(0.05)
    states = {i: (job.state if (job := app.get(i)) else None) for i in [*acked, after]}
    worker.send_signal(signal.SIGTERM)
    worker_exit = worker.wait(30)
    app.close()
    conn = sqlite3.connect(f"{mountpoint}/jobs.db")
    integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    conn.close()
    print(
        json.dumps(
            {
                "error_type": type(error).__name__ if error else None,
                "error_classes": [c.__name__ for c in type(error).__mro__] if error else [],
                "error": str(error) if error else None,
                "acked": len(acked),
                "not_done": [i for i, s in states.items() if s != "done"],
                "integrity": integrity,
                "worker_exit": worker_exit,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
