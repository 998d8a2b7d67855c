"""Wake-ups by LISTEN/NOTIFY on a dedicated connection, with polling when LISTEN cannot work
(PgBouncer in transaction mode keeps no session, so a LISTEN there hears nothing reliably:
pass `listen=False` to `open`, and `wait` polls)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

import psycopg
from psycopg import sql

from ...errors import StoreUnavailable
from .connection import _INHERITED, Connections

POLL = 0.5  # seconds between polls when LISTEN is unavailable


class Listener:
    """One listening connection per store and process; `wait` is safe from several threads
    (they take turns; a thread that cannot get the connection in time returns False)."""

    def __init__(self, connections: Connections, channel: str, enabled: bool = True) -> None:
        self._connections = connections
        self._channel = channel
        self._enabled = enabled
        self._conn: psycopg.Connection | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._retry_at = 0.0

    def _listening(self) -> psycopg.Connection | None:
        if self._conn is not None and self._pid != os.getpid():
            _INHERITED.append(self._conn)
            self._conn = None
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._conn = None
        if self._conn is None and self._enabled and time.monotonic() >= self._retry_at:
            try:
                conn = self._connections.connect(autocommit=True)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            except (StoreUnavailable, psycopg.Error):
                self._retry_at = time.monotonic() + 5.0  # poll meanwhile
                return None
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def wait(
        self,
        queues: Sequence[str],
        timeout: float,
        until_due: Callable[[psycopg.Connection], tuple[float | None, float | None]] | None = None,
    ) -> bool:
        """Block until a notification for one of `queues` arrives (True) or `timeout` passes.
        With `until_due` (run on the listening connection: notifications that arrive meanwhile
        wait in psycopg's backlog), also True once a scheduled job falls due: it returns the
        seconds until then (None: none scheduled) and when to ask it again (None: not before
        the timeout)."""
        deadline = time.monotonic() + max(timeout, 0.0)
        if not self._lock.acquire(timeout=max(timeout, 0.0)):
            return False
        try:
            conn = self._listening()
            if conn is None:
                time.sleep(max(0.0, min(POLL, deadline - time.monotonic())))
                return time.monotonic() < deadline
            wanted = set(queues)
            due_at = ask_at = float("inf")
            ask = until_due is not None
            while True:
                clock = time.monotonic()
                if ask and until_due is not None:
                    due_in, ask_in = until_due(conn)
                    due_at = float("inf") if due_in is None else clock + due_in
                    ask_at = float("inf") if ask_in is None else clock + ask_in
                    ask = False
                if clock >= due_at:
                    return True
                if clock >= deadline:
                    return False
                if clock >= ask_at:
                    ask = True
                    continue
                left = min(deadline, due_at, ask_at) - clock
                for note in conn.notifies(timeout=left, stop_after=1):
                    if not wanted or note.payload in wanted:
                        return True
        except psycopg.Error:
            self.close()
            return True  # a spurious wake-up: the caller looks again, we reconnect next time
        finally:
            self._lock.release()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            try:
                conn.close()
            except Exception:
                pass
        elif conn is not None:
            _INHERITED.append(conn)
