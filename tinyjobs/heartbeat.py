"""A worker process's heartbeat in the store, for the dashboard's workers page and /metrics.

Written every BEAT_EVERY seconds from the worker's loop (which turns at least every quarter
second), so an idle worker costs one small write every few seconds and no thread of its own.
A beat that fails is logged and tried again at the next interval: heartbeats are for people
watching, never for correctness (leases are)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .holder import Holder
from .stores.base import Store, WorkerBeat

BEAT_EVERY = 5.0  # seconds; Store.workers() calls a worker lost after 15 s of silence by default


class Heartbeat:
    """Beats for one worker process: `tick(busy)` writes when a beat is due."""

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
        self._next = 0.0  # the first tick beats at once

    def tick(self, busy: int) -> None:
        clock = time.monotonic()
        if clock < self._next:
            return
        self._next = clock + self.every
        try:
            self.store.beat(replace(self.beat, busy=busy), self.now())
        except Exception as err:  # a heartbeat never stops the worker
            self.logger.warning("worker.heartbeat_failed", error=str(err))
