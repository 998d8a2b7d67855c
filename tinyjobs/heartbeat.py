"""A worker process's heartbeat in the store, for the dashboard's workers page and /metrics.

A daemon thread of its own writes one beat every BEAT_EVERY seconds, so that a slow store (a
beat is a round trip or three) never delays the worker's loop and its lease renewals, and a
draining worker still beats. Idle, it costs one sleeping thread and one small write every few
seconds (on PostgreSQL, that thread's connection). A beat that fails is tried again at the next
interval and logged once per outage (`worker.heartbeat_failed`, then `worker.heartbeat_restored`),
so a store that is down does not fill the log: heartbeats are for people watching, never for
correctness (leases are)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .holder import Holder
from .storeguard import describe
from .stores.base import Store, WorkerBeat

BEAT_EVERY = 5.0  # seconds; Store.workers() calls a worker lost after 15 s of silence by default


class Heartbeat:
    """Beats for one worker process: `tick(busy)` writes one now; `start(busy)` beats on a
    thread of its own until `stop()`."""

    def __init__(
        self,
        store: Store,
        holder: Holder,
        queues: Sequence[str],
        slots: int,
        now: Callable[[], float | None],
        logger: Any,
        every: float = BEAT_EVERY,
    ) -> None:
        self.store, self.now, self.logger, self.every = store, now, logger, every
        self.beat = WorkerBeat(
            host=holder.hostname,
            pid=os.getpid(),
            queues=tuple(queues),
            slots=slots,
            busy=0,
            started_at=now() or time.time(),
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def tick(self, busy: int) -> None:
        """Write one beat now; a failure is logged (once until a beat succeeds), never raised."""
        try:
            self.store.beat(replace(self.beat, busy=busy), self.now())
        except Exception as err:  # a heartbeat never stops the worker
            if not self._failing:
                self.logger.warning("worker.heartbeat_failed", error=describe(err))
            self._failing = True
            return
        if self._failing:
            self.logger.info("worker.heartbeat_restored")
        self._failing = False

    def start(self, busy: Callable[[], int]) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self.tick(busy())
                self._stop.wait(self.every)

        self._thread = threading.Thread(target=run, name="tinyjobs-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
