"""One SQLite connection per thread, never used (nor closed) across fork.

SQLite's rule: a connection opened before fork() must not be used, not even closed, in the
child (https://www.sqlite.org/howtocorrupt.html, "Carrying an open database connection across
a fork()"): closing it there could take the file's last-connection
path (checkpoint, remove the WAL) behind the parent's back. So a child abandons every
inherited connection, keeps it referenced for good, and opens fresh ones.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref

from tinyjobs.errors import StoreUnavailable
from tinyjobs.urls import mask

from .connection import Target, connect
from .filesystem import FileId, file_id

# Connections inherited through fork, held so that they are never deallocated (dealloc closes).
_INHERITED: list[sqlite3.Connection] = []
_POOLS: weakref.WeakSet[Pool] = weakref.WeakSet()


class _Slot:
    """A thread's connection. The thread-local dict drops it when its thread ends: the
    connection is then closed, so short-lived threads do not leak file descriptors."""

    __slots__ = ("conn", "pool", "pid", "file")

    def __init__(self, conn: sqlite3.Connection, pool: Pool, file: FileId | None) -> None:
        self.conn, self.pool, self.pid, self.file = conn, pool, os.getpid(), file

    def __del__(self) -> None:
        if self.pid != os.getpid():
            return  # inherited through fork: never close it here
        self.pool._forget(self.conn)
        try:
            self.conn.close()
        except sqlite3.Error:
            pass


class Pool:
    """This process's connections to one file: one per thread and kind ("main" for the store's
    statements, "wait" for polling PRAGMA data_version), opened lazily."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.closed = False
        self.opened = False  # a connection was opened: the file exists, or existed
        self._start()
        _POOLS.add(self)

    def _start(self) -> None:
        self._pid = os.getpid()
        self._local = threading.local()
        self._lock = threading.RLock()  # _Slot.__del__ may run inside a locked section (GC)
        self._all: list[sqlite3.Connection] = []

    def _abandon(self) -> None:
        """In a forked child: keep the parent's connections referenced, start afresh."""
        _INHERITED.extend(self._all)
        self._start()

    def ensure_open(self) -> None:
        """StoreUnavailable once the pool was closed (this thread's connections closed then),
        as `get` raises, without looking at the file."""
        if self.closed:
            self._release_own()
            raise StoreUnavailable(f"sqlite store {mask(self.target.url)!r} is closed")

    def get(self, kind: str = "main") -> sqlite3.Connection:
        """This thread's connection of `kind`."""
        if self._pid != os.getpid():
            self._abandon()  # at-fork hook missed (fork without os.fork's hooks)
        self.ensure_open()
        slot = getattr(self._local, kind, None)
        slot = self._same_file(slot)
        if slot is None:
            conn = connect(self.target)
            with self._lock:
                self._all.append(conn)
            slot = _Slot(conn, self, file_id(self.target.path))
            setattr(self._local, kind, slot)
            self.opened = True
        return slot.conn

    def _same_file(self, slot: _Slot | None) -> _Slot | None:
        """`slot`, or None when the file at the path is another one now (replaced, say from a
        backup: the next connection opens it). Once the file this pool opened was removed,
        StoreUnavailable: not writing on into the deleted inode, nor creating an empty file in
        its place. (One stat per call: about a microsecond.)"""
        now = file_id(self.target.path)
        if now is None and self.opened:
            raise StoreUnavailable(
                f"sqlite store {mask(self.target.url)!r}: the database file {self.target.path!r} "
                "was removed while this process had it open; refusing to write into a file "
                "nobody else can see, or to start an empty one (put the file back, or restart "
                "every process that uses it)"
            )
        if slot is not None and slot.file != now:
            return None  # the caller's new slot replaces it, which closes the old connection
        return slot

    def written_to_current_file(self) -> None:
        """After a commit on this thread's "main" connection: StoreUnavailable when the file
        was removed or replaced meanwhile (what was committed went into a file nobody sees, so
        it must not be acknowledged)."""
        slot = getattr(self._local, "main", None)
        if slot is not None and file_id(self.target.path) != slot.file:
            raise StoreUnavailable(
                f"sqlite store {mask(self.target.url)!r}: the database file {self.target.path!r} "
                "was removed or replaced during this write; what it wrote is lost with the old file"
            )

    def _forget(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)

    def _release_own(self) -> None:
        """Close this thread's connections (dropping the slots closes them)."""
        self._local.__dict__.clear()

    def close(self) -> None:
        """Close this thread's connections now; another thread's connection is closed by that
        thread, at its next call or when it ends. (Closing a connection while another thread
        runs a statement on it crashes the interpreter: sqlite3 does not guard it.)"""
        if self._pid != os.getpid():
            self._abandon()
        self.closed = True
        self._release_own()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._all)


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._abandon()


os.register_at_fork(after_in_child=_after_fork_in_child)
