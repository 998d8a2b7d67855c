"""Where handlers run: threads for sync handlers, one asyncio loop for async ones, and a
wake-up pipe that any thread (and a signal handler) can poke without taking a lock."""

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
        with contextlib.suppress(InterruptedError):
            select.select([self._read], [], [], max(0.0, timeout))
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._read, 4096):
                pass

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


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
