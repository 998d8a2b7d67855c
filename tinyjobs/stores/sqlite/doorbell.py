"""The SQLite store's bells: a small file beside the database that a writer touches after a
commit, and that threads waiting for that news watch with Linux inotify, so that they sleep in
the kernel instead of polling.

The store rings one: `<database>-unlock`, after every write's COMMIT; a writer waiting for the
write lock (connection.begin_immediate) watches it and tries again at once. (Waiting workers do
not use a bell: a bell wakes every watcher on the host, and a job should wake one worker. They
wait on the wake-up channels of channels.py. Versions before those rang `<database>-wake`.)

A bell file holds one byte. `ring()` rewrites it (one pwrite, no fsync: the bell carries no
data, and a crash loses nothing but a wake-up that the waiters' own timeouts make up for).
Every write of it is an IN_MODIFY event for every inotify watch on the file, in this process and
in every other one on this host.

`Watch` is one thread's inotify instance on the bell, made through ctypes on the C library
(inotify_init1 / inotify_add_watch; no dependency). Where that is impossible (not Linux, no
inotify on the filesystem, the per-user limit of instances reached, or the env var
TINYJOBS_SQLITE_WAKE=poll), `Doorbell.watch()` returns None and the waiter sleeps instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import struct
import sys
import threading

UNLOCK_SUFFIX = "-unlock"  # rung after every write commit (see store._write)
WAKE_ENV = "TINYJOBS_SQLITE_WAKE"  # "poll" forces the fallbacks, for tests and odd systems

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_IGNORED = 0x00008000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000  # O_CLOEXEC on Linux
_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


def _libc() -> ctypes.CDLL | None:
    """The C library's inotify calls, or None where they do not exist."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


class Watch:
    """One thread's inotify instance watching the bell file. Not shared across threads nor
    across fork (the child makes its own: an inherited instance shares its event queue)."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path, self.pid = fd, path, os.getpid()
        self.lost = False  # the watched file was deleted or moved: make a new watch
        self._poll = select.poll()  # not select(): descriptors past 1023 are fine
        self._poll.register(fd, select.POLLIN)

    def ready(self, timeout: float) -> bool:
        """True when the bell rang since the last `ready` (events consumed), within `timeout`."""
        try:
            events = self._poll.poll(max(0, int(timeout * 1000 + 0.999)))
        except InterruptedError:
            return True
        return bool(events) and self.drain()

    def drain(self) -> bool:
        """Consume pending events; True if there were any. Notices a bell that is gone."""
        rang = False
        while True:
            try:
                data = os.read(self.fd, 4096)
            except (BlockingIOError, InterruptedError):
                return rang
            except OSError:
                self.lost = True
                return True
            if not data:
                return rang
            rang = True
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                if mask & _GONE:
                    self.lost = True
                offset += _EVENT.size + length

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()  # also in a forked child: closing an inherited fd touches only our copy


class Doorbell:
    """The bell of one database file: `ring()` after commits, `watch()` for this thread."""

    def __init__(self, database: str, mode: str | None = None, suffix: str = UNLOCK_SUFFIX) -> None:
        self.path = database + suffix
        mode = (mode if mode is not None else os.environ.get(WAKE_ENV, "")).strip().lower()
        self.enabled = _LIBC is not None and mode != "poll"
        self._fd: int | None = None
        self._pid = 0
        self._local = threading.local()
        self._lock = threading.Lock()

    def _open(self) -> int | None:
        """This process's descriptor of the bell file, created if missing."""
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                return self._fd  # another thread opened it meanwhile
            if self._fd is not None:  # inherited through fork: our copy only
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError:
                self._fd = None
                return None
            self._pid = os.getpid()
            return self._fd

    def ring(self) -> None:
        """Tell every watcher on this host. Never raises: a bell that cannot ring only leaves
        waiters to their own timeouts."""
        if not self.enabled:
            return
        fd = self._open()
        if fd is None:
            return
        try:
            os.pwrite(fd, b"\0", 0)
        except OSError:
            pass  # the next ring tries again with the same descriptor

    def watch(self) -> tuple[Watch | None, bool]:
        """This thread's watch on the bell and whether it was just made (it has not seen the
        rings before); (None, False) when the store must poll instead."""
        if not self.enabled:
            return None, False
        watch: Watch | None = getattr(self._local, "watch", None)
        if watch is not None and watch.pid == os.getpid() and not watch.lost:
            return watch, False
        if watch is not None:
            watch.close()
            self._local.watch = None
        watch = self._new_watch()
        self._local.watch = watch
        return watch, watch is not None

    def _new_watch(self) -> Watch | None:
        assert _LIBC is not None
        if self._open() is None:  # the file must exist to be watched
            return None
        fd = _LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return None  # EMFILE (max_user_instances) and the like: poll
        mask = IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF
        if _LIBC.inotify_add_watch(fd, os.fsencode(self.path), mask) < 0:
            os.close(fd)
            return None
        return Watch(fd, self.path)

    def close(self) -> None:
        """Drop this thread's watch (other threads' watches close when their threads end).
        The ringing descriptor stays open until the bell is collected: another thread may be
        ringing right now, and a number closed under it could be reused by an unrelated file."""
        watch = getattr(self._local, "watch", None)
        if watch is not None:
            watch.close()
            self._local.watch = None

    def __del__(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._fd)
