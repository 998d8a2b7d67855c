"""The worker processes of `tinyjobs verify`: started, killed in turn and replaced.

Each worker is `python -m tinyjobs.verify.worker`, a real tinyjobs worker, with its output in a
log file of verify's temporary directory. A worker that exits without verify having signalled
it died on its own; one that exits with a status other than 0 after SIGTERM did not stop
cleanly; one that has not exited `stop_timeout` seconds after SIGTERM is killed, and did not
stop cleanly either."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import worker as verify_worker

WORKER_MODULE = "tinyjobs.verify.worker"  # tests may point this at a module of their own
MAX_REPLACEMENTS = 50  # workers that keep dying are not replaced for ever
POLL = 0.02


@dataclass
class Member:
    """One worker process."""

    number: int
    proc: subprocess.Popen[bytes]
    log: Path
    signalled: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class FleetRecord:
    """What happened to the workers: kills by signal, deaths verify did not cause, and exits
    that were not clean after SIGTERM (pid and what was seen)."""

    by_signal: dict[int, int] = field(default_factory=lambda: {signal.SIGTERM: 0, signal.SIGKILL: 0})
    unexpected: list[tuple[int, int | None]] = field(default_factory=list)
    unclean: list[tuple[int, str]] = field(default_factory=list)

    @property
    def kills(self) -> int:
        return sum(self.by_signal.values())


class Fleet:
    """`size` workers on verify's queue; `kill` stops the oldest and starts another."""

    def __init__(
        self,
        size: int,
        directory: Path,
        env: dict[str, str],
        stop_timeout: float,
        ready_timeout: float = 60.0,
    ) -> None:
        self.size, self.directory, self.stop_timeout = size, directory, stop_timeout
        self.ready_timeout = ready_timeout
        self.env = {
            **os.environ,
            **env,
            verify_worker.ENV_PARENT: str(os.getpid()),
            verify_worker.ENV_DIR: str(directory),
        }
        self.members: list[Member] = []
        self.record = FleetRecord()
        self.all_pids: list[int] = []
        self.logs: list[Path] = []
        self._started = 0

    def start_one(self) -> Member:
        self._started += 1
        path = self.directory / f"worker-{self._started}.log"
        with open(path, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                process_group=0,  # a Ctrl-C at the terminal is for verify, not its workers
            )
        member = Member(self._started, proc, path)
        self.members.append(member)
        self.all_pids.append(proc.pid)
        self.logs.append(path)
        return member

    def start(self) -> None:
        for _ in range(self.size):
            self.start_one()

    def is_ready(self, member: Member) -> bool:
        """True once the worker works: its signal handlers are in place and it has claimed."""
        return (self.directory / f"ready-{member.pid}").exists()

    def ready(self) -> bool:
        """True when every current worker has started working."""
        return all(self.is_ready(m) for m in self.members)

    def _await_ready(self, member: Member, deadline: float | None = None) -> None:
        """Wait (bounded) until a worker works before stopping it: a signal that lands while
        Python is still importing tests the interpreter, not the worker."""
        deadline = deadline or time.monotonic() + self.ready_timeout
        while not self.is_ready(member) and member.proc.poll() is None:
            if time.monotonic() >= deadline:
                return
            time.sleep(POLL)

    def wait_ready(self, timeout: float, cancelled: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not cancelled():
            self.check_deaths()
            if self.ready() and len(self.members) == self.size:
                return True
            time.sleep(POLL)
        return False

    def check_deaths(self, replace: bool = True) -> None:
        """Record workers that exited on their own, and start others in their place."""
        for member in list(self.members):
            status = member.proc.poll()
            if status is None or member.signalled is not None:
                continue
            self.members.remove(member)
            self.record.unexpected.append((member.pid, status))
            if replace and self._started < self.size + MAX_REPLACEMENTS:
                self.start_one()

    def kill(self, signum: int) -> None:
        """Stop the oldest live worker with `signum`, wait for it, and start another."""
        self.check_deaths()
        if not self.members:
            return
        victim = self.members[0]
        self._await_ready(victim)
        if victim.proc.poll() is not None:
            self.check_deaths()
            return self.kill(signum)
        victim.signalled = signum
        self.record.by_signal[signum] += 1
        victim.proc.send_signal(signum)
        self._wait_exit(victim)
        self.members.remove(victim)
        self.start_one()

    def _wait_exit(self, member: Member) -> None:
        deadline = time.monotonic() + self.stop_timeout
        while member.proc.poll() is None and time.monotonic() < deadline:
            self.check_deaths()
            time.sleep(POLL)
        status = member.proc.poll()
        if member.signalled != signal.SIGTERM:
            member.proc.wait()
            return
        if status is None:
            member.proc.kill()
            member.proc.wait()
            self.record.unclean.append((member.pid, f"still running {self.stop_timeout:g} s after SIGTERM"))
        elif status != 0:
            self.record.unclean.append((member.pid, f"exit status {_status(status)} on SIGTERM"))

    def stop_all(self) -> None:
        """SIGTERM every worker at once, then wait for each (a hard kill past the timeout)."""
        self.check_deaths(replace=False)
        deadline = time.monotonic() + self.ready_timeout
        for member in self.members:
            self._await_ready(member, deadline)
        self.check_deaths(replace=False)
        for member in self.members:
            member.signalled = signal.SIGTERM
            member.proc.send_signal(signal.SIGTERM)
        for member in self.members:
            self._wait_exit(member)
        self.members = []

    def store_errors(self) -> int:
        """How many store errors the workers logged (an outage is logged once, as it starts)."""
        count = 0
        for path in self.logs:
            try:
                text = path.read_text(errors="replace")
                count += text.count('"store.error"') + text.count('"store.unreachable"')
            except OSError:
                continue
        return count


def _status(code: int) -> str:
    return f"{code}" if code >= 0 else f"{code} (signal {signal.Signals(-code).name})"
