"""Where handlers run: threads for sync handlers, one asyncio loop for async ones, a wake-up
pipe that any thread (and a signal handler) can poke without taking a lock, and the inbox that
carries finished attempts back to the worker's loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import select
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any


class Waker:
    """A self-pipe. `wake()` is safe from any thread and from signal handlers (one write)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._write, b"x")

    def wait(self, timeout: float) -> None:
        """Return when woken or after `timeout` seconds; consumes pending wake-ups."""
        try:
            readable, _, _ = select.select([self._read], [], [], max(0.0, timeout))
        except InterruptedError:
            readable = [self._read]
        if readable:
            # One read, not a second one to see EAGAIN: a busy loop waits every turn. Were
            # more than 4096 wake-ups pending, the rest only make the next wait return at once.
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(self._read, 4096)

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


class Inbox:
    """Items handed to one consumer loop from any thread, waking it through `waker`.

    `put` wakes the loop only for the first item since the loop last called `take_all`: the loop
    takes every waiting item each time it looks, so the items after the first need no wake-up
    of their own (a pipe write per finished job cost a system call and a GIL hand-off each).
    The flag is read and set without a lock on purpose: two threads may both wake the loop,
    which is harmless, and none can be left unseen, because `take_all` re-arms the flag before
    it takes; an item put after that take finds the flag armed, or a put that disarmed it
    after the re-arm wakes the loop, which will take this item too."""

    def __init__(self, waker: Waker) -> None:
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._waker = waker
        self._armed = True

    def put(self, item: Any) -> None:
        self._items.put(item)
        if self._armed:
            self._armed = False
            self._waker.wake()

    def take_all(self) -> list[Any]:
        """Every item waiting, oldest first (the consumer loop only)."""
        self._armed = True
        items = []
        while True:
            try:
                items.append(self._items.get_nowait())
            except queue.Empty:
                return items


class ThreadSlots:
    """`size` daemon threads running sync calls. Daemon threads, because a handler stuck past
    its timeout must not keep the process alive once the worker decided to exit (JOB-12)."""

    def __init__(self, size: int) -> None:
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"tinyjobs-slot-{i}", daemon=True) for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        while True:
            call = self._work.get()
            if call is None:
                return
            call()

    def submit(self, call: Callable[[], None]) -> None:
        self._work.put(call)

    def close(self) -> None:
        for _ in self._threads:
            self._work.put(None)


class AsyncSlots:
    """One event loop in a daemon thread, started on first use, for async handlers."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def submit(self, coro: Coroutine[Any, Any, None]) -> Future[None]:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="tinyjobs-async", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
