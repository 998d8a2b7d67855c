"""A TCP proxy of the tests' own, between a client and a server on loopback, that misbehaves on
request like a bad network:

    with FaultyProxy(("127.0.0.1", server_port)) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
        proxy.stall()      # bytes stop flowing both ways; connections stay open (no RST, no FIN)
        proxy.resume()     # what was held back flows again
        proxy.drop()       # every open connection is reset (RST); new ones are accepted
        proxy.delay = 0.05 # each chunk waits this long before it is passed on (per direction)

A stall is what a silent network partition looks like to a client: its kernel still accepts
what it writes (the proxy's kernel acknowledges it), no error ever comes, answers just stop.
Only a deadline of the client's own ends the wait. Threads, one pair per connection; every
socket closed on exit."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

CHUNK = 65536


class FaultyProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.delay = 0.0
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._closed = False
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._thread.start()

    # -- faults ------------------------------------------------------------------------------

    def stall(self) -> None:
        """Stop passing bytes on, in both directions, on every connection (new ones too)."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def drop(self) -> None:
        """Reset every open connection (SO_LINGER 0: the peers get RST, not FIN)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for sock in conns:
            _reset(sock)

    # -- plumbing ----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                _reset(client)  # the server is down: the client sees a reset, as with a real one
                continue
            with self._lock:
                self._conns += [client, server]
                self.accepted += 1
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)
                while not self._flowing.wait(0.05):
                    if self._closed:
                        return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.drop()

    def __enter__(self) -> FaultyProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
