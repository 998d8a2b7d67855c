"""Running a real Worker in a thread of the test process, stopped with a deadline."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tinyjobs.worker import Worker


@contextmanager
def worker_thread(app, **options) -> Iterator[Worker]:
    """A Worker running in a thread; on exit it is asked to stop and joined (10 s deadline)."""
    worker = Worker(app, handle_signals=False, **options)
    outcome: dict[str, str] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("reason", worker.run()), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(10)
        assert not thread.is_alive(), "worker did not stop within 10 s"
    worker.exit_reason = outcome.get("reason")  # type: ignore[attr-defined]
