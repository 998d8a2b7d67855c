"""The worker's store watcher: a daemon thread (two where the store's wait wakes one waiter:
`watchers_for`) that waits on the store's news (another process enqueued, a scheduled job fell
due) while the worker has a free slot, and sleeps on an Event while it has none: a full
worker has no use for the news (it claims anyway as its jobs finish, in its settle_and_claim),
and no thread of an idle or full worker polls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

# The store's wait: the watcher comes back this often to see whether to stop. Nothing else
# needs it back (it is a daemon thread: a worker that stops does not wait for it), and each
# return costs a wake-up (and on PostgreSQL a query for the next due time); 10 s, not 2 s.
WATCH_FOR = 10.0


def watchers_for(store: Any) -> int:
    """How many threads watch `store`: two where its wait wakes one waiter per piece of news
    (its "wakes_one" capability: Redis's blocking pop, SQLite's token in a FIFO), so that the
    one the news woke can run a lone job itself (no hand-off to a slot thread) while the other
    goes on watching; one where news wakes every waiter (PostgreSQL's NOTIFY reaches every
    LISTEN connection: both would claim, one for nothing) or the store does not say. (SQLite
    polls where it cannot use its FIFOs: both threads then see a change, and one claims for
    nothing, a cost the rare fallback can bear.)"""
    return 2 if "wakes_one" in getattr(store, "capabilities", ()) else 1


class StoreWatcher:
    """Calls `on_news(covered)` (on a thread of its own) each time the store's wait for
    `queues` says jobs may have changed while `show_room(True)` was the worker's last word;
    until `stopping()`. A failing wait is not reported (the worker's loop reports store
    errors): tried again after half a second.

    With `threads` > 1, that many threads wait at once; `covered` says whether another of
    them was still waiting when this one's wait returned: then this one may take its time
    (run the job the news brought) while the news that comes meanwhile still wakes someone.
    The last one to leave its wait is never covered, so one of them always goes back to
    waiting at once."""

    def __init__(
        self,
        store: Any,
        queues: Sequence[str],
        on_news: Callable[[bool], None],
        stopping: Callable[[], bool],
        threads: int = 1,
    ) -> None:
        self._store, self._queues = store, list(queues)
        self._on_news, self._stopping = on_news, stopping
        self._room = threading.Event()  # set while a slot is free
        self._room.set()
        self._threads = threads
        self._waiting = 0  # threads in the store's wait (or on their way into it)
        self._count = threading.Lock()

    def start(self) -> None:
        for i in range(self._threads):
            name = "tinyjobs-wake" if i == 0 else f"tinyjobs-wake-{i}"
            threading.Thread(target=self._watch, name=name, daemon=True).start()

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
            count = self._count
            with count:
                self._waiting += 1
            try:
                news = store.wait(queues, WATCH_FOR)
            except Exception:  # the loop reports store errors; this thread only wakes it
                news = None
            finally:
                with count:
                    self._waiting -= 1
                    covered = self._waiting > 0
            if news is None:
                time.sleep(0.5)
                continue
            if news and room.is_set():
                self._on_news(covered)
