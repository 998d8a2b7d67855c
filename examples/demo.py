"""The demo of the README: enqueue real jobs on the SQLite default, start a worker process,
watch the jobs finish and print their results, then stop the worker with SIGTERM.

    python examples/demo.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

from examples.wordcount import app, count_words, longest_word  # noqa: E402


def main() -> int:
    files = sorted(str(p) for p in (ROOT / "tinyjobs").glob("*.py"))[:6]
    jobs = [count_words.enqueue(path=f) for f in files] + [longest_word.enqueue(path=files[0])]
    print(f"enqueued {len(jobs)} jobs on {app.url}")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tinyjobs",
            "worker",
            "--app",
            "examples.wordcount:app",
            "--slots",
            "4",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        pending = {job.id for job in jobs}
        while pending and time.monotonic() < deadline:
            for job_id in list(pending):
                job = app.get(job_id)
                if job is not None and job.finished:
                    pending.discard(job_id)
                    print(f"{job.state:6} {job.task:13} attempt {job.attempts}: {job.result or job.error}")
            time.sleep(0.05)
        if pending:
            print(f"{len(pending)} jobs did not finish within 60 s", file=sys.stderr)
            return 1
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=40)
    print(f"worker drained and exited with status {worker.returncode}")
    return 0 if worker.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
