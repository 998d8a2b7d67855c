"""Signals in the supervisor: handlers only record (a reentrant queue and the wake-up fd), the
main loop acts. Signals are blocked across fork, and the child resets them before it unblocks."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
from collections.abc import Iterator
from typing import Any

HANDLED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGHUP,
    signal.SIGCHLD,
)


class SignalQueue:
    """Records the signals the supervisor handles; `wake_fd` becomes readable on each one."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    @property
    def wake_fd(self) -> int:
        return self._read

    @property
    def fds(self) -> tuple[int, int]:
        """Both ends of the wake-up pipe (a child closes them)."""
        return self._read, self._write

    def install(self) -> None:
        """Install the recording handler for every handled signal (main thread only)."""
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in HANDLED:
            signal.signal(signum, self._record)

    def _record(self, signum: int, frame: Any) -> None:
        """The handler. NO LOGGING, no I/O: SimpleQueue.put is reentrant-safe."""
        self._queue.put_nowait(signum)

    def pending(self) -> list[int]:
        """The signals received since the last call, in order; drains the wake-up pipe."""
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._read, 4096):
                pass
        out: list[int] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """Block the handled signals for the body (around fork): no handler runs half-way through
    forking, and the child starts with them blocked until it has its own handlers."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def reset_in_child() -> None:
    """Called in the child right after fork, signals still blocked: drop the supervisor's
    handlers and wake-up fd. SIGINT and SIGHUP are ignored (a terminal's Ctrl-C or hangup is
    the supervisor's to handle; it tells the workers). The caller installs the worker's own
    handlers and then calls `unblock()`."""
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    for signum in HANDLED:
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def unblock() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
