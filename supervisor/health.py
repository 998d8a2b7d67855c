"""The health socket (SUP-09): a Unix stream socket, mode 0660, served from the supervisor's
selector loop (no thread). Each connection gets one JSON document and is closed; the client
need not speak. Whatever a client sends is read and dropped (bounded); a client that does not
read is given a short deadline; neither ever blocks the loop.

`judge(doc)` says how healthy a document is; `query(path, timeout)` is the client, for
`tinyjobs check --socket`."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import BootError

MODE = 0o660
MAX_CLIENTS = 32
CLIENT_DEADLINE = 2.0  # seconds a client has to take its document
MAX_ANSWER = 1 << 20
STALE_REAP = 10.0  # a leader that has not reaped for this long is not doing its duties


def judge(doc: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """`doc` with `healthy`, `status` and `problems` added (docs/operations.md, "Health socket").

    `status` is "healthy" with no problem; "degraded" when workers run and every problem is one
    that passes by itself while they keep their jobs (the store away: they wait with backoff
    and resume when it is back; a failed reload: they run the code loaded before);
    "unhealthy" otherwise (no worker running, leader duties stale)."""
    now = time.time() if now is None else now
    hard: list[str] = []
    soft: list[str] = []
    if not any(w.get("state") == "running" for w in doc.get("workers") or []):
        hard.append("no worker is running")
    store = doc.get("store") or {}
    if store.get("reachable") is None:
        soft.append("store not asked yet")  # until the leader's first tick, after the workers' first reports
    elif not store["reachable"]:
        since = store.get("since")
        away = f" for {now - since:.0f} s" if isinstance(since, int | float) else ""
        soft.append(f"store unreachable{away}: {store.get('error')}")
    if doc.get("leader") and (doc.get("last_reap") is None or now - doc["last_reap"] > STALE_REAP):
        hard.append(f"leader duties are stale: no reap in the last {STALE_REAP:g} s")
    reload = doc.get("last_reload") or {}
    if reload.get("ok") is False:
        soft.append(f"degraded: the last reload failed ({reload.get('error')})")
    problems = hard + soft
    status = "unhealthy" if hard else "degraded" if soft else "healthy"
    return {**doc, "healthy": not problems, "status": status, "problems": problems}


@dataclass
class _Client:
    sock: socket.socket
    pending: bytes
    deadline: float


class HealthServer:
    """Listens on `path`; `document()` builds the answer at accept time."""

    def __init__(
        self,
        path: str,
        selector: selectors.BaseSelector,
        document: Callable[[], dict[str, Any]],
        log: Any,
    ) -> None:
        self.path, self.selector, self.document, self.log = path, selector, document, log
        self.listener: socket.socket | None = None
        self.clients: dict[int, _Client] = {}
        self._inode: int | None = None

    def open(self) -> None:
        """Bind the socket; BootError with a clear message when the path cannot be used."""
        _clear_path(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        old_umask = os.umask(0o117)  # never wider than 0660, even for a moment
        try:
            listener.bind(self.path)
        except OSError as err:
            listener.close()
            raise BootError(f"health socket {self.path!r}: cannot bind: {err.strerror}") from None
        finally:
            os.umask(old_umask)
        os.chmod(self.path, MODE)
        listener.listen(MAX_CLIENTS)
        listener.setblocking(False)
        self._inode = os.stat(self.path).st_ino
        self.listener = listener
        self.selector.register(listener, selectors.EVENT_READ, self._accept)

    def fds(self) -> list[int]:
        """Every descriptor of the server (a forked child closes them)."""
        out = [c.sock.fileno() for c in self.clients.values()]
        return out + ([self.listener.fileno()] if self.listener else [])

    def _accept(self, sock: socket.socket, mask: int) -> None:
        for _ in range(MAX_CLIENTS):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                self.log.warning("health.accept_failed", error=str(err))
                return
            if len(self.clients) >= MAX_CLIENTS:
                conn.close()  # too many slow clients: the newest waits its turn elsewhere
                continue
            conn.setblocking(False)
            try:
                answer = json.dumps(self.document(), default=str).encode() + b"\n"
            except Exception as err:  # a bug in the document must not stop the loop
                answer = json.dumps({"error": f"health document failed: {err}"}).encode() + b"\n"
            client = _Client(conn, answer, time.monotonic() + CLIENT_DEADLINE)
            self.clients[conn.fileno()] = client
            self.selector.register(conn, selectors.EVENT_READ | selectors.EVENT_WRITE, self._serve)

    def _serve(self, sock: socket.socket, mask: int) -> None:
        client = self.clients.get(sock.fileno())
        if client is None:
            return
        if mask & selectors.EVENT_READ:
            with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
                sock.recv(4096)  # a client's words are read and dropped, never parsed
        if mask & selectors.EVENT_WRITE and client.pending:
            try:
                sent = sock.send(client.pending)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._drop(client)
                return
            client.pending = client.pending[sent:]
        if not client.pending:
            self._drop(client)

    def next_deadline(self) -> float:
        """The earliest deadline of a client still being answered (inf when none)."""
        return min((c.deadline for c in self.clients.values()), default=float("inf"))

    def expire(self, now: float | None = None) -> None:
        """Close clients past their deadline (slow readers)."""
        now = time.monotonic() if now is None else now
        for client in [c for c in self.clients.values() if now >= c.deadline]:
            self.log.warning("health.client_too_slow", unsent=len(client.pending))
            self._drop(client)

    def _drop(self, client: _Client) -> None:
        self.clients.pop(client.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(client.sock)
        with contextlib.suppress(OSError):
            client.sock.shutdown(socket.SHUT_RDWR)
        client.sock.close()

    def close(self) -> None:
        """Stop listening and remove the socket file if it is still ours."""
        for client in list(self.clients.values()):
            self._drop(client)
        if self.listener is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(self.listener)
            self.listener.close()
            self.listener = None
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self._inode:
                    os.unlink(self.path)


def _clear_path(path: str) -> None:
    """Remove a stale socket at `path`; BootError when it is not a socket, answers (another
    supervisor serves it), or its directory is missing or not writable."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise BootError(f"health socket {path!r}: directory {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BootError(f"health socket {path!r}: directory {folder!r} is not writable")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise BootError(
            f"health socket {path!r} exists and is not a socket; remove it or choose another --socket"
        )
    try:
        query(path, timeout=0.5)
    except (OSError, ValueError):
        os.unlink(path)  # nobody answers: left by a supervisor that died
        return
    raise BootError(f"health socket {path!r}: another supervisor answers on it")


def query(path: str, timeout: float = 2.0) -> dict[str, Any]:
    """The supervisor's health document from its socket at `path`.

    Raises OSError (FileNotFoundError, ConnectionRefusedError, TimeoutError, ...) when nothing
    answers within `timeout` seconds, and ValueError when the answer is not a JSON object."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        chunks, size = [], 0
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
            size += len(data)
            if size > MAX_ANSWER:
                raise ValueError(f"health socket {path!r}: answer larger than {MAX_ANSWER} bytes")
    document = json.loads(b"".join(chunks).decode("utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"health socket {path!r}: the answer is not a JSON object")
    return document
