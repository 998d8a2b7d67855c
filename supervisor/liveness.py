"""Heartbeats and recycle limits.

A worker reports through a pipe whose read end sits in the supervisor's selector: one short
line, `<running> <finished> <state>`, written from the worker's own loop (Worker.on_tick), so a
wedged loop goes silent even when some thread of it still runs. Writes are non-blocking and
smaller than PIPE_BUF (atomic); a full pipe drops a beat instead of blocking the worker."""

from __future__ import annotations

import contextlib
import os
import random
import time
from dataclasses import dataclass

MAX_LINE = 128


@dataclass
class Beat:
    """The last report of a worker."""

    running: int
    finished: int
    state: str  # "up", or the reason it is stopping: stopped, recycle, max-jobs, ...


class HeartbeatWriter:
    """The worker's end. `beat()` is cheap: it writes the first report, a change of state (the
    worker leaving: the supervisor replaces it at once), and otherwise one report an `interval`.
    A change of the counts alone waits for the interval: each line wakes the supervisor, and a
    worker at 50 jobs a second changed them at every turn of its loop (four lines a second on
    SQLite) for the health document's `jobs` and `finished`, which may lag an interval."""

    def __init__(self, fd: int, interval: float) -> None:
        self.fd, self.interval = fd, interval
        os.set_blocking(fd, False)
        self._last: tuple[int, int, str] | None = None
        self._sent_at = 0.0

    def beat(self, running: int, finished: int, state: str) -> bool:
        """Report; True when a line was written."""
        now = time.monotonic()
        report = (running, finished, state)
        due = now - self._sent_at >= self.interval
        if not due and self._last is not None and self._last[2] == state:
            return False
        line = f"{running} {finished} {state}\n".encode()[:MAX_LINE]
        try:
            os.write(self.fd, line)
        except (BlockingIOError, BrokenPipeError, OSError):
            return False
        self._last, self._sent_at = report, now
        return True


class HeartbeatReader:
    """The supervisor's end of one worker's pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self._partial = b""

    def read(self) -> tuple[list[Beat], bool]:
        """The complete reports waiting in the pipe, and whether the pipe is closed (EOF)."""
        chunks, eof = [], False
        while True:
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                break
            except OSError:
                eof = True
                break
            if not data:
                eof = True
                break
            chunks.append(data)
        buffer = self._partial + b"".join(chunks)
        *lines, self._partial = buffer.split(b"\n")
        self._partial = self._partial[-MAX_LINE:]
        return [b for b in (_parse(line) for line in lines) if b is not None], eof

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _parse(line: bytes) -> Beat | None:
    parts = line.decode(errors="replace").split()
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return Beat(int(parts[0]), int(parts[1]), parts[2])


def rss_bytes(pid: int) -> int | None:
    """Resident memory of `pid` from /proc (VmRSS), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def jittered(limit: int | None, fraction: float, rng: random.Random | None = None) -> int | None:
    """`limit` grown by up to `fraction` at random, so that workers started together do not
    all recycle together (gunicorn's max_requests_jitter)."""
    if limit is None:
        return None
    uniform = rng.uniform if rng is not None else random.uniform
    return limit + int(uniform(0, fraction) * limit)
