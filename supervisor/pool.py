"""The worker processes: forking them, reaping them, replacing them (with backoff when they keep
dying), ending a dead one's leases at once (DUR-02), killing hung ones, recycling past
--max-memory, and the one-by-one replacement of a reload. Called from the main loop only."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from tinyjobs.runtime import Runtime
from tinyjobs.urls import mask

from . import signals
from .child import Child, ChildSpec, run_child
from .config import CHILD_BOOT_ERROR, CHILD_REASONS, SupervisorConfig
from .liveness import HeartbeatReader, jittered, rss_bytes

STABLE_AFTER = 10.0  # a worker up this long ends a streak of crashes
BACKOFF_MAX = 10.0
KILL_GRACE = 5.0  # after its drain timeout, a leaving worker gets this long before SIGKILL
ABORT_GRACE = 1.0  # a hung worker gets SIGABRT (a traceback), then SIGKILL after this
MEMORY_EVERY = 1.0


class Pool:
    """`workers` processes numbered 1..N. `inherited_fds()` names what a child must close."""

    def __init__(
        self,
        config: SupervisorConfig,
        selector: selectors.BaseSelector,
        inherited_fds: Callable[[], list[int]],
        log: Any,
    ) -> None:
        self.config, self.selector, self.log = config, selector, log
        self.inherited_fds = inherited_fds
        self.children: dict[int, Child] = {}
        self.generation = 0
        self.crash_streak = 0
        self.spawn_after: dict[int, float] = {}
        self.boot_failed = False
        self._next_memory = 0.0

    # -- forking -----------------------------------------------------------------------------

    def spawn(self, number: int, app: Runtime) -> Child:
        """Fork worker `number`. The child never returns from this call (run_child exits)."""
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        close = [read_fd, *self.inherited_fds(), *(c.reader.fd for c in self.children.values())]
        spec = ChildSpec(
            number=number,
            app=app,
            config=self.config,
            parent_pid=os.getpid(),
            beat_fd=write_fd,
            close_fds=close,
            max_jobs=jittered(self.config.max_jobs, self.config.jitter),
        )
        sys.stdout.flush()
        sys.stderr.flush()
        with signals.blocked():
            pid = os.fork()
            if pid == 0:
                run_child(spec)
        os.close(write_fd)
        child = Child(
            number=number,
            pid=pid,
            generation=self.generation,
            reader=HeartbeatReader(read_fd),
            spawned=time.monotonic(),
            max_memory=jittered(self.config.max_memory, self.config.jitter),
        )
        self.children[pid] = child
        self.selector.register(read_fd, selectors.EVENT_READ, lambda fd, mask: self._beats(child))
        self.log.info("worker.spawned", worker=number, worker_pid=pid, generation=self.generation)
        return child

    def _beats(self, child: Child) -> None:
        beats, eof = child.reader.read()
        if beats:
            child.beat, child.last_beat = beats[-1], time.monotonic()
            if child.beat.state != "up" and not child.retiring:
                child.retiring = child.beat.state  # it decided to leave: replace it now
                self.log.info("worker.leaving", worker=child.number, reason=child.beat.state)
        if eof:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(child.reader.fd)

    # -- reaping -----------------------------------------------------------------------------

    def reap(self, app: Runtime, stopping: bool) -> None:
        """Collect every exited child; end its leases at once and schedule its replacement."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is not None:
                self._exited(child, os.waitstatus_to_exitcode(status), app, stopping)

    def _exited(self, child: Child, code: int, app: Runtime, stopping: bool) -> None:
        self._beats(child)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(child.reader.fd)
        child.reader.close()
        ended = self._end_leases(child, app)
        why = _describe(code)
        expected = stopping or child.retiring is not None
        log = self.log.info if expected and code >= 0 else self.log.warning
        log("worker.exited", worker=child.number, worker_pid=child.pid, exit=why, leases_ended=ended)
        if code == CHILD_BOOT_ERROR and not child.booted:
            self.boot_failed = True
            return
        if not expected:
            self.crash_streak += 1
            delay = 0.0 if self.crash_streak <= 1 else min(BACKOFF_MAX, 0.25 * 2 ** (self.crash_streak - 1))
            self.spawn_after[child.number] = time.monotonic() + delay
            if delay:
                self.log.warning("worker.backoff", worker=child.number, delay=delay)

    def _end_leases(self, child: Child, app: Runtime) -> int | None:
        """DUR-02: the dead worker's jobs are due again now, not after their lease."""
        try:
            return app.store.end_leases([child.holder], app.clock.store_now())
        except Exception as err:  # the reaper ends them later (holders check, or expiry)
            self.log.error("leases.end_failed", worker_pid=child.pid, error=mask(str(err)))
            return None

    # -- watching ----------------------------------------------------------------------------

    def next_due(self, now: float, stopping: bool) -> float:
        """The monotonic time `check` or `manage` next has something to do, were no event to
        come before (an exit or a report wakes the supervisor's loop by itself): a SIGKILL
        due, a worker's heartbeat deadline, a memory check, the end of a crash streak, a
        spawn after backoff. inf when nothing is pending."""
        due = float("inf")
        for child in self.children.values():
            if child.kill_at is not None:
                due = min(due, child.kill_at)
            else:
                due = min(due, child.last_beat + self.config.heartbeat_timeout + 0.001)
            if self.crash_streak and child.booted:
                due = min(due, child.spawned + STABLE_AFTER + 0.001)
        if self._watch_memory():
            due = min(due, self._next_memory)
        if not stopping:
            for number in range(1, self.config.workers + 1):
                after = self.spawn_after.get(number, 0.0)
                if after > now and not self.live(number):
                    due = min(due, after)
        return due

    def _watch_memory(self) -> bool:
        """Whether any worker has a --max-memory to check every MEMORY_EVERY. Without one, a
        worker's rss is read when the health document asks for it (Child.health), not polled."""
        return any(c.max_memory for c in self.children.values())

    def check(self, now: float, stopping: bool) -> None:
        """Kill the hung and the overdue, recycle the too big, end a crash streak."""
        memory = now >= self._next_memory and self._watch_memory()
        if memory:
            self._next_memory = now + MEMORY_EVERY
        for child in list(self.children.values()):
            if child.kill_at is not None and now >= child.kill_at:
                self.log.warning("worker.killed", worker=child.number, worker_pid=child.pid)
                _kill_group(child.pid, signal.SIGKILL)
                child.kill_at = float("inf")
            elif child.kill_at is None and now - child.last_beat > self.config.heartbeat_timeout:
                silent = round(now - child.last_beat, 3)
                self.log.error("worker.hung", worker=child.number, worker_pid=child.pid, silent=silent)
                child.retiring = child.retiring or "hung"
                _kill(child.pid, signal.SIGABRT)
                child.kill_at = now + ABORT_GRACE
            if memory and child.booted:  # before its first report its pages are still ours
                self._check_memory(child, now, stopping)
            if self.crash_streak and child.booted and now - child.spawned > STABLE_AFTER:
                self.crash_streak = 0

    def _check_memory(self, child: Child, now: float, stopping: bool) -> None:
        child.rss = rss_bytes(child.pid)
        limit = child.max_memory
        if limit and child.rss and child.rss > limit and not child.retiring and not stopping:
            self.log.info("worker.max_memory", worker=child.number, rss=child.rss, limit=limit)
            self.retire(child, "max-memory", now)

    def retire(self, child: Child, why: str, now: float) -> None:
        """Drain `child` (SIGTERM): it stops claiming, finishes within the drain timeout, hands
        back the rest, exits. Its slot is filled by a new worker at once."""
        child.retiring = child.retiring or why
        _kill(child.pid, signal.SIGTERM)
        deadline = now + self.config.drain_timeout + KILL_GRACE
        child.kill_at = min(child.kill_at or deadline, deadline)

    def signal_all(self, signum: int, kill_at: float) -> None:
        """Send `signum` to every worker, SIGKILL at `kill_at`. A worker already leaving gets
        no second SIGTERM (to a worker, a second SIGTERM means stop now)."""
        for child in self.children.values():
            if signum != signal.SIGTERM or not child.retiring:
                _kill(child.pid, signum)
            child.retiring = child.retiring or "stopping"
            child.kill_at = min(child.kill_at or kill_at, kill_at)

    # -- keeping N -----------------------------------------------------------------------------

    def live(self, number: int) -> list[Child]:
        return [c for c in self.children.values() if c.number == number and not c.retiring]

    def manage(self, app: Runtime, now: float) -> None:
        """Fill empty slots (respecting the backoff), then take one step of a reload."""
        for number in range(1, self.config.workers + 1):
            if not self.live(number) and now >= self.spawn_after.get(number, 0.0):
                self.spawn(number, app)
        self._reload_step(app, now)

    def _reload_step(self, app: Runtime, now: float) -> None:
        """One slot at a time: start the new worker, and once it runs, drain the old one."""
        for number in range(1, self.config.workers + 1):
            live = self.live(number)
            old = [c for c in live if c.generation < self.generation]
            if not old:
                continue
            new = [c for c in live if c.generation == self.generation]
            if not new:
                self.spawn(number, app)
            elif any(c.booted for c in new):
                for child in old:
                    self.retire(child, "reload", now)
            return

    def reloading(self) -> bool:
        return any(c.generation < self.generation for c in self.children.values() if not c.retiring)

    def all_booted(self) -> bool:
        live = [c for n in range(1, self.config.workers + 1) for c in self.live(n)]
        return len(live) >= self.config.workers and all(c.booted for c in live)


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return CHILD_REASONS.get(code, f"exit {code}")


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _kill_group(pid: int, signum: int) -> None:
    """Signal the worker's process group (its own, set after fork: job subprocesses too)."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        _kill(pid, signum)
