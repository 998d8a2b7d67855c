"""The worker's store watcher: a daemon thread that waits on the store's news (another process
enqueued, a scheduled job fell due) while the worker has a free slot, and sleeps on an Event
while it has none: a full worker has no use for the news (it claims anyway as its jobs finish,
in its settle_and_claim), and no thread of an idle or full worker polls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

# The store's wait: the watcher comes back this often to see whether to stop. Nothing else
# needs it back (it is a daemon thread: a worker that stops does not wait for it), and each
# return costs a wake-up (and on PostgreSQL a query for the next due time); 10 s, not 2 s.
WATCH_FOR = 10.0


class StoreWatcher:
    """Calls `on_news()` (on its own thread) each time the store's wait for `queues` says jobs
    may have changed while `show_room(True)` was the worker's last word; until `stopping()`.
    A failing wait is not reported (the worker's loop reports store errors): tried again
    after half a second."""

    def __init__(
        self, store: Any, queues: Sequence[str], on_news: Callable[[], None], stopping: Callable[[], bool]
    ) -> None:
        self._store, self._queues = store, list(queues)
        self._on_news, self._stopping = on_news, stopping
        self._room = threading.Event()  # set while a slot is free
        self._room.set()

    def start(self) -> None:
        threading.Thread(target=self._watch, name="tinyjobs-wake", daemon=True).start()

    def show_room(self, free: bool) -> None:
        """Whether a slot is free (the Event changes only when it flips)."""
        if free:
            if not self._room.is_set():
                self._room.set()
        elif self._room.is_set():
            self._room.clear()

    @property
    def room(self) -> bool:
        return self._room.is_set()

    def _watch(self) -> None:
        store, queues, room = self._store, self._queues, self._room
        while not self._stopping():
            if not room.is_set():
                room.wait(WATCH_FOR)
                continue
            try:
                news = store.wait(queues, WATCH_FOR)
            except Exception:  # the loop reports store errors; this thread only wakes it
                time.sleep(0.5)
                continue
            if news and room.is_set():
                self._on_news()
