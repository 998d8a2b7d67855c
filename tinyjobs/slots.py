"""Where handlers run: threads for sync handlers, one asyncio loop for async ones, a wake-up
pipe that any thread (and a signal handler) can poke without taking a lock, and the inbox that
carries finished attempts back to the worker's loop."""

from __future__ import annotations

import contextlib
import math
import os
import queue
import select
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio


class Waker:
    """A self-pipe. `wake()` is safe from any thread and from signal handlers (one write).

    `watch(fd)` adds the write end of a pipe whose reader may go away (a worker's pipe to its
    supervisor): `wait` then also returns, once, when that reader is gone (the kernel reports
    POLLERR on the write end of a pipe with no reader left), so a process learns that its
    parent died without waking up to look."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._poll = select.poll()
        self._poll.register(self._read, select.POLLIN)
        self._watched: int | None = None
        # Set once the watched pipe lost its reader. Read this, not getppid(): a dying parent's
        # descriptors close before its children are handed to another parent, so a wake-up
        # for it can come while getppid() still names the parent.
        self.reader_gone = False

    def watch(self, fd: int) -> None:
        """Also return from `wait` when the pipe whose write end is `fd` loses its reader."""
        self._poll.register(fd, 0)  # no event asked: POLLERR and POLLHUP come regardless
        self._watched = fd

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._write, b"x")

    def wait(self, timeout: float) -> bool:
        """Return when woken (True) or after `timeout` seconds (False); consumes pending
        wake-ups. A watched pipe that lost its reader counts as a wake-up, once."""
        # poll takes whole milliseconds: rounded up, so that a wait never ends before its time
        # (the caller would find nothing due and wait again for less than a millisecond).
        try:
            events = self._poll.poll(math.ceil(min(max(0.0, timeout), 86400.0) * 1000))
        except InterruptedError:
            events = [(self._read, select.POLLIN)]
        woken = False
        for fd, _ in events:
            if fd == self._read:
                # One read, not a second one to see EAGAIN: a busy loop waits every turn. Were
                # more than 4096 wake-ups pending, the rest only make the next wait return at
                # once.
                with contextlib.suppress(BlockingIOError, OSError):
                    os.read(self._read, 4096)
            elif fd == self._watched:
                self._poll.unregister(fd)  # reported once: the caller reads reader_gone
                self._watched = None
                self.reader_gone = True
            woken = True
        return woken

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
        self.add(item)
        self.nudge()

    def add(self, item: Any) -> None:
        """Put `item` without waking the loop: the caller then either takes the items itself
        (in the loop's role, see Worker._lend_a_hand) or calls `nudge()`."""
        self._items.put(item)

    def nudge(self) -> None:
        """Wake the loop for the items added since it last looked, unless woken for them already."""
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


# A slot's call: runs a job, and may return a second part to run once the slot is free again.
Call = Callable[[], "Callable[[], None] | None"]


class ThreadSlots:
    """`size` daemon threads running sync calls. Daemon threads, because a handler stuck past
    its timeout must not keep the process alive once the worker decided to exit (JOB-12).

    The first thread is preferred: a job goes to it whenever it has none, and to the others
    only while it has one. At a low rate every job then runs on the same thread, whose store
    connection (one per thread on SQLite and PostgreSQL) and caches stay warm, and which the
    worker lets claim and settle a lone job itself (see `Worker._lend_a_hand`); the others
    stay asleep. The first thread also runs short errands (`submit_first`) between its jobs."""

    def __init__(self, size: int) -> None:
        self._work: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        self._first_work: queue.SimpleQueue[tuple[Call, bool] | None] = queue.SimpleQueue()
        # Whether the first thread has a job in hand or queued: set by `submit` as it hands it
        # one, cleared by that thread once the job's call returned. One submitter at a time
        # (the worker's loop role) sets it and the first thread alone clears it, so it never
        # gets a second job while it has one (the others would wait behind it, and with one
        # slot forever), and `size` jobs always find `size` threads.
        self._first_busy = False
        self._threads = [threading.Thread(target=self._serve_first, name="tinyjobs-slot-0", daemon=True)]
        for i in range(1, size):
            self._threads.append(threading.Thread(target=self._serve, name=f"tinyjobs-slot-{i}", daemon=True))
        self.first = self._threads[0]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        while True:
            call = self._work.get()
            if call is None:
                return
            after = call()
            if after is not None:
                after()

    def _serve_first(self) -> None:
        while True:
            item = self._first_work.get()
            if item is None:
                return
            call, job = item
            after = call()
            if job:
                self._first_busy = False
            if after is not None:
                after()

    def submit(self, call: Call) -> None:
        """Run the job `call` on a free thread (the first one when it has no job), then what
        it returns: the thread is free again before that second part runs, so a job submitted
        meanwhile waits for it, not for another slot. One thread submits at a time."""
        if self._first_busy:
            self._work.put(call)
        else:
            self._first_busy = True
            self._first_work.put((call, True))

    def submit_first(self, errand: Callable[[], None]) -> None:
        """Run `errand`, which is not a job, on the first thread, after what it has in hand."""
        self._first_work.put((errand, False))

    @property
    def first_free(self) -> bool:
        """Whether the first thread has no job (for the submitting thread: then it stays so)."""
        return not self._first_busy

    def on_first(self) -> bool:
        """Whether the calling thread is the first (preferred) slot thread."""
        return threading.current_thread() is self.first

    def close(self) -> None:
        self._first_work.put(None)
        for _ in self._threads[1:]:
            self._work.put(None)


class AsyncSlots:
    """One event loop in a daemon thread, started on first use, for async handlers."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting = threading.Lock()  # a slot thread may submit too (a job claimed ahead)

    def submit(self, coro: Coroutine[Any, Any, None]) -> Future[None]:
        """Run `coro` on the event loop; safe from any thread."""
        import asyncio  # here: `import tinyjobs` alone does not load it (tinyjobs/aio.py says why)

        if self._loop is None:
            with self._starting:
                if self._loop is None:
                    loop = asyncio.new_event_loop()
                    threading.Thread(target=loop.run_forever, name="tinyjobs-async", daemon=True).start()
                    self._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
