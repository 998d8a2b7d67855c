"""journald's native protocol, in plain Python: one AF_UNIX datagram per entry to
/run/systemd/journal/socket ($TINYJOBS_JOURNAL_SOCKET overrides it, for tests), with fields
MESSAGE, PRIORITY, SYSLOG_IDENTIFIER and one TINYJOBS_<KEY> per event key (TINYJOBS_JOB_ID,
TINYJOBS_TASK, TINYJOBS_QUEUE, TINYJOBS_ATTEMPT, ...). An entry too large for a datagram goes
in a sealed memfd passed over the socket, as sd_journal_send(3) does.

Used when $JOURNAL_STREAM names stdout's or stderr's device and inode (systemd connected the
stream to the journal). log.configure() wires `to_fields` and `JournalLogger` into structlog;
this module itself needs no third-party package."""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import json
import os
import re
import socket
import struct
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from typing import IO, Any

DEFAULT_SOCKET = "/run/systemd/journal/socket"
IDENTIFIER = "tinyjobs"
PRIORITIES = {"debug": 7, "info": 6, "warning": 4, "warn": 4, "error": 3, "critical": 2}
_BAD_KEY = re.compile(r"[^A-Z0-9_]")
_RESERVED = {"event", "level", "timestamp", "exception"}


def socket_path() -> str:
    return os.environ.get("TINYJOBS_JOURNAL_SOCKET") or DEFAULT_SOCKET


def stream_is_journal(streams: Iterable[Any] | None = None) -> bool:
    """True when $JOURNAL_STREAM ("<st_dev>:<st_ino>") names one of `streams` (stdout and
    stderr by default): systemd connected it to the journal."""
    wanted = os.environ.get("JOURNAL_STREAM", "")
    if not wanted:
        return False
    for stream in streams if streams is not None else (sys.stdout, sys.stderr):
        try:
            info = os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):
            continue
        if f"{info.st_dev}:{info.st_ino}" == wanted:
            return True
    return False


def field_name(key: str) -> str:
    """A journal field name: uppercase letters, digits and '_', not starting with '_' or a
    digit (a leading '_' marks fields only journald itself may set)."""
    name = _BAD_KEY.sub("_", key.upper()).lstrip("_")
    if not name or name[0].isdigit():
        name = "X" + name
    return name[:64]


def encode(fields: Mapping[str, Any]) -> bytes:
    """One entry: `KEY=value\\n`, or for a value holding a newline `KEY\\n<u64 le length>value\\n`."""
    out = bytearray()
    for key, value in fields.items():
        data = value if isinstance(value, bytes) else str(value).encode("utf-8", "replace")
        name = key.encode("ascii")
        if b"\n" in data:
            out += name + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += name + b"=" + data + b"\n"
    return bytes(out)


def to_fields(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """structlog's last processor for journald: the event as journal fields. (`event_dict` is
    structlog's EventDict, spelled out: this module imports no third-party package.)"""
    event = str(event_dict.get("event", ""))
    level = str(event_dict.get("level", method)).lower()
    extra = {k: v for k, v in event_dict.items() if k not in _RESERVED}
    pairs = " ".join(f"{k}={_text(v)}" for k, v in extra.items())
    message = f"{event} {pairs}".strip()
    if event_dict.get("exception"):
        message += "\n" + str(event_dict["exception"])
    fields: dict[str, Any] = {
        "MESSAGE": message,
        "PRIORITY": PRIORITIES.get(level, 6),
        "SYSLOG_IDENTIFIER": IDENTIFIER,
        "TINYJOBS_EVENT": event,
    }
    for key, value in extra.items():
        fields[field_name(f"tinyjobs_{key}")] = _text(value)
    return fields


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


class JournalSender:
    """Sends entries to the journal socket. One socket per process (re-made after fork)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or socket_path()
        self._sock: socket.socket | None = None
        self._pid = 0

    def _socket(self) -> socket.socket:
        if self._sock is None or self._pid != os.getpid():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            self._sock, self._pid = sock, os.getpid()
        return self._sock

    def send(self, fields: Mapping[str, Any]) -> bool:
        """True when journald took the entry."""
        data = encode(fields)
        try:
            self._socket().sendto(data, self.path)
            return True
        except OSError as err:
            if err.errno not in (errno.EMSGSIZE, errno.ENOBUFS):
                return False
        return self._send_memfd(data)

    def _send_memfd(self, data: bytes) -> bool:
        """The entry in a sealed memfd, its descriptor in an empty datagram."""
        try:
            fd = os.memfd_create("tinyjobs-journal", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except (AttributeError, OSError):
            return False
        try:
            os.write(fd, data)
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
            self._socket().sendmsg([], rights, 0, self.path)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)


class JournalLogger:
    """A structlog logger whose methods take the journal fields (from `to_fields`) and send
    them; when the journal does not answer, the entry is printed to `fallback` as JSON."""

    def __init__(self, sender: JournalSender, fallback: IO[str] | None = None) -> None:
        self.sender, self.fallback = sender, fallback

    def msg(self, **fields: Any) -> None:
        if self.sender.send(fields):
            return
        stream = self.fallback or sys.stderr
        with contextlib.suppress(Exception):
            stream.write(json.dumps(fields, default=str) + "\n")
            stream.flush()

    debug = info = warning = warn = error = critical = exception = fatal = log = msg
