"""sd_notify in plain Python: one AF_UNIX datagram of KEY=VALUE lines to $NOTIFY_SOCKET, a path
or an abstract ('@') address. Not under systemd (no socket), every call does nothing; errors
are swallowed, since systemd's answer is never needed (sd_notify(3))."""

from __future__ import annotations

import os
import socket
import time


class Notifier:
    """Speaks to systemd for the supervisor. Build it with `from_environment` before forking:
    it removes NOTIFY_SOCKET and WATCHDOG_* so that workers and job code never inherit them."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self.address = address
        self.watchdog_interval = watchdog_usec / 2_000_000 if watchdog_usec else None
        self._next_watchdog = 0.0
        self._last_status: str | None = None

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Notifier:
        """Read and unset the variables. WATCHDOG_USEC counts only when WATCHDOG_PID is unset
        or names this process (sd_watchdog_enabled(3))."""
        env = os.environ if environ is None else environ
        address = env.pop("NOTIFY_SOCKET", None) or None
        usec_text = env.pop("WATCHDOG_USEC", None)
        pid_text = env.pop("WATCHDOG_PID", None)
        usec: int | None = None
        if usec_text and (not pid_text or pid_text.strip() == str(os.getpid())):
            try:
                usec = int(usec_text)
            except ValueError:
                usec = None
        return cls(address, usec if usec and usec > 0 else None)

    def send(self, **fields: str | int) -> bool:
        """Send KEY=VALUE lines in one datagram; True when it was sent."""
        if not self.address:
            return False
        payload = "\n".join(f"{key}={value}" for key, value in fields.items()).encode()
        target = self.address
        if target.startswith("@"):
            target = "\0" + target[1:]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(target)
                sock.sendall(payload)
        except OSError:
            return False
        return True

    def ready(self, status: str) -> None:
        self._last_status = status
        self.send(READY=1, STATUS=status, MAINPID=os.getpid())

    def status(self, status: str) -> None:
        """STATUS= when the text changed (one line)."""
        line = status.replace("\n", " ")
        if line != self._last_status:
            self._last_status = line
            self.send(STATUS=line)

    def stopping(self, status: str, extend: float) -> None:
        self._last_status = status
        self.send(STOPPING=1, STATUS=status, EXTEND_TIMEOUT_USEC=int(extend * 1_000_000))

    def extend(self, seconds: float) -> None:
        """Give the stop job `seconds` more from now (sent repeatedly while draining)."""
        self.send(EXTEND_TIMEOUT_USEC=int(seconds * 1_000_000))

    def watchdog_due(self) -> float | None:
        """The monotonic time the next WATCHDOG=1 is due (None without a watchdog)."""
        return None if self.watchdog_interval is None else self._next_watchdog

    def watchdog(self, now: float | None = None) -> float | None:
        """Send WATCHDOG=1 when half the interval passed; returns seconds until the next one
        (None without a watchdog). Call it only from a healthy main loop."""
        if self.watchdog_interval is None:
            return None
        now = time.monotonic() if now is None else now
        if now >= self._next_watchdog:
            self.send(WATCHDOG=1)
            self._next_watchdog = now + self.watchdog_interval
        return self._next_watchdog - now
