"""Who holds a lease: this host (boot id and hostname), a pid and that process's start time.

A holder is gone when no process has its pid and start time, or that process is a zombie
(`kill(pid, 0)` succeeds on a zombie, and in a container PID 1 may never reap it). Only holders
on this host can be judged; a holder on another host is left to its lease (DUR-02)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import cache, cached_property


@cache
def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return "no-boot-id"


@cache
def host_id() -> str:
    """This host and boot: leases from an earlier boot of this host are all gone."""
    return f"{socket.gethostname()}/{boot_id()}"


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode(errors="replace")
    except OSError:
        return None
    # The command name sits in parentheses and may itself hold spaces and parentheses.
    return raw[raw.rfind(")") + 2 :].split()


def process_start(pid: int) -> int | None:
    """The start time of `pid` in clock ticks since boot, or None when there is no such process."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def is_alive(pid: int, started: int) -> bool:
    """True when `pid` runs with that start time and is not a zombie."""
    fields = _stat_fields(pid)
    if not fields or len(fields) <= 19:
        return False
    return fields[0] not in ("Z", "X") and int(fields[19]) == started


@dataclass(frozen=True)
class Holder:
    """The identity a lease records. `id` is what stores keep."""

    host: str
    pid: int
    started: int

    @cached_property  # a store's every claim sends it: made once (the holder is frozen)
    def id(self) -> str:
        return f"{self.host}|{self.pid}|{self.started}"

    @classmethod
    def parse(cls, text: str) -> Holder:
        host, pid, started = text.rsplit("|", 2)
        return cls(host, int(pid), int(started))

    @classmethod
    def current(cls) -> Holder:
        pid = os.getpid()
        return cls(host_id(), pid, process_start(pid) or 0)

    @cached_property
    def hostname(self) -> str:
        return self.host.split("/", 1)[0]

    def is_gone(self) -> bool:
        """True when this holder is on this host and its process has ended (or is a zombie)."""
        return self.host == host_id() and not is_alive(self.pid, self.started)
