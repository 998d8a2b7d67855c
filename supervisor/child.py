"""One worker process: the supervisor's record of it, and the code that runs in it after fork."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import setproctitle

from tinyjobs import log
from tinyjobs.holder import Holder, host_id, process_start
from tinyjobs.runtime import Runtime
from tinyjobs.worker import Worker

from . import signals
from .config import CHILD_BOOT_ERROR, CHILD_EXIT, EXIT_CRASH, SupervisorConfig
from .liveness import Beat, HeartbeatReader, HeartbeatWriter, rss_bytes


@dataclass
class Child:
    """The supervisor's record of a worker process it forked."""

    number: int
    pid: int
    generation: int
    reader: HeartbeatReader
    spawned: float  # monotonic
    max_memory: int | None = None
    holder: Holder = field(init=False)
    last_beat: float = field(init=False)
    beat: Beat | None = None
    retiring: str | None = None  # why the supervisor no longer counts it (it is leaving)
    kill_at: float | None = None  # SIGKILL once this monotonic time passes
    rss: int | None = None

    def __post_init__(self) -> None:
        # Read while the child cannot have been reaped yet: it is our child and alive or a
        # zombie, so /proc still has its start time (the lease holder's identity).
        self.holder = Holder(host_id(), self.pid, process_start(self.pid) or 0)
        self.last_beat = self.spawned

    @property
    def booted(self) -> bool:
        """True once the worker's loop reported at least once."""
        return self.beat is not None

    @property
    def state(self) -> str:
        if self.retiring:
            return f"leaving ({self.retiring})"
        if self.beat is None:
            return "booting"
        return "running" if self.beat.state == "up" else f"leaving ({self.beat.state})"

    def health(self, now: float) -> dict[str, Any]:
        """This worker's entry in the health document (SUP-09)."""
        return {
            "number": self.number,
            "pid": self.pid,
            "state": self.state,
            "jobs": self.beat.running if self.beat else 0,
            "finished": self.beat.finished if self.beat else 0,
            "last_heartbeat": round(now - self.last_beat, 3),
            "uptime": round(now - self.spawned, 3),
            # Polled every second only under --max-memory (Pool.check); otherwise read now.
            "rss": self.rss if self.max_memory else rss_bytes(self.pid),
        }


@dataclass
class ChildSpec:
    """What a forked child needs to become a worker."""

    number: int
    app: Runtime
    config: SupervisorConfig
    parent_pid: int
    beat_fd: int
    close_fds: Sequence[int]
    max_jobs: int | None


def run_child(spec: ChildSpec) -> NoReturn:
    """Called in the child right after fork, with the handled signals blocked. Never returns:
    it leaves with os._exit, so that the supervisor's atexit handlers, buffered stdio and
    store connections (sqlite3!) are not closed or flushed twice."""
    code = EXIT_CRASH
    try:
        code = _become_worker(spec)
    except BaseException as err:  # the exit code tells the supervisor; nothing may escape
        with contextlib.suppress(Exception):
            log.get_logger(pid=os.getpid(), worker=spec.number).exception("worker.crashed", error=str(err))
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _become_worker(spec: ChildSpec) -> int:
    for fd in spec.close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    signals.reset_in_child()
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # a terminal's Ctrl-C goes to the supervisor only; killpg reaches jobs
    log.configure(buffered=True)  # structlog again in this process (JSON, or journald's native protocol)
    logger = log.get_logger(pid=os.getpid(), worker=spec.number)
    faulthandler.enable()  # SIGABRT from the supervisor (hung worker) dumps every thread
    config = spec.config
    setproctitle.setproctitle(f"tinyjobs: worker {spec.number} [0/{config.slots} jobs]")
    writer = HeartbeatWriter(spec.beat_fd, config.heartbeat_interval)
    ticker = _Ticker(spec.number, config.slots, writer)
    try:
        worker = Worker(
            spec.app,
            slots=config.slots,
            queues=config.queues,
            drain_timeout=config.drain_timeout,
            max_jobs=spec.max_jobs,
            parent_pid=spec.parent_pid,
            parent_fd=spec.beat_fd,  # only the supervisor reads it: its death wakes the loop
            on_tick=ticker.tick,
            handle_signals=True,
            reaper=False,  # the supervisor's leader reaps
        )
    except Exception as err:
        logger.error("worker.boot_failed", error=str(err))
        return CHILD_BOOT_ERROR
    _install_handlers(worker)
    signals.unblock()
    reason = worker.run()
    return CHILD_EXIT.get(reason, 0)


def _install_handlers(worker: Worker) -> None:
    """SIGTERM drains (a second one stops now), SIGQUIT stops now: handing running jobs back.
    Worker.run installs its own SIGTERM handler with the same meaning; this one covers the
    moment before it does. Handlers only set flags (Worker.request_* are signal-safe)."""

    def on_term(signum: int, frame: Any) -> None:
        if worker.reason is None:
            worker.request_stop()
        else:
            worker.request_hard_stop()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGQUIT, lambda signum, frame: worker.request_hard_stop())


class _Ticker:
    """Worker.on_tick in the child: heartbeat, and the process title when it changed."""

    def __init__(self, number: int, slots: int, writer: HeartbeatWriter) -> None:
        self.number, self.slots, self.writer = number, slots, writer
        self._title: tuple[int, str] | None = None

    def tick(self, worker: Worker) -> None:
        running = len(worker.running)
        state = "up" if worker.reason is None else worker.reason
        self.writer.beat(running, worker.finished, state)
        if self._title != (running, state):
            self._title = (running, state)
            suffix = "" if state == "up" else f" {state}"
            setproctitle.setproctitle(f"tinyjobs: worker {self.number} [{running}/{self.slots} jobs]{suffix}")
