"""The worker process that `tinyjobs verify` starts: `python -m tinyjobs.verify.worker`.

It is a real tinyjobs Worker (the same claim, lease, renewal, drain and reaper as any worker)
running one task whose side effect is a row in verify's ledger. Everything it needs comes from
the environment that verify sets: the store URL (namespace included), the queue and its lease,
the ledger, the slots, and verify's pid. When verify dies, the worker notices that its parent
changed and stops by itself (a verifier killed outright leaves no worker behind)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import log
from ..app import App
from ..run import Run
from ..worker import Worker
from .ledger import Writer

TASK = "tinyjobs.verify"
WORK_SECONDS = 0.05  # each job works this long, so that a SIGKILL finds jobs in flight
DRAIN_TIMEOUT = 10.0  # verify's jobs take milliseconds; a drain longer than this is a failure
ENV_QUEUE, ENV_LEASE, ENV_LEDGER = "TINYJOBS_VERIFY_QUEUE", "TINYJOBS_VERIFY_LEASE", "TINYJOBS_VERIFY_LEDGER"
ENV_DIR, ENV_PARENT, ENV_SLOTS = "TINYJOBS_VERIFY_DIR", "TINYJOBS_VERIFY_PARENT", "TINYJOBS_VERIFY_SLOTS"

Fault = Callable[[Run, int], Any]


def build_app(fault: Fault | None = None) -> App:
    """The app of verify's workers: one queue with verify's lease and one task. `fault`, when
    given, runs before the side effect (tests use it to make jobs fail or cancel)."""
    app = App(os.environ["TINYJOBS_URL"])
    queue = os.environ[ENV_QUEUE]
    app.queue(queue, lease=float(os.environ[ENV_LEASE]))
    writer = Writer(Path(os.environ[ENV_LEDGER]), os.getpid())

    @app.task(name=TASK, queue=queue)
    def verify_job(run: Run, n: int) -> int:
        """Record the run, work a little, then apply job `n`'s side effect: its ledger row."""
        if fault is not None:
            outcome = fault(run, n)
            if outcome is not None:
                return outcome
        writer.started(n, run.id, run.attempt)
        time.sleep(WORK_SECONDS)
        writer.apply(n, run.id)
        return n

    return app


def main(fault: Fault | None = None) -> None:
    """Run one worker until SIGTERM (drain, exit 0), SIGKILL, or verify's death."""
    log.configure(buffered=True)
    app = build_app(fault)
    ready = Path(os.environ[ENV_DIR]) / f"ready-{os.getpid()}"

    def on_tick(worker: Worker) -> None:
        if not ready.exists():
            ready.touch()

    worker = Worker(
        app,
        slots=int(os.environ.get(ENV_SLOTS, "8")),
        queues=[os.environ[ENV_QUEUE]],
        drain_timeout=DRAIN_TIMEOUT,
        parent_pid=int(os.environ[ENV_PARENT]),
        on_tick=on_tick,
    )
    worker.run()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # handler threads must not hold the process open


if __name__ == "__main__":
    main()
