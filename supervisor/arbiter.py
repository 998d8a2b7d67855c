"""The arbiter: the supervisor's single-threaded main loop (gunicorn's arbiter is the model).

Signal handlers only record; each turn of the loop waits on one selector (signal wake-up fd,
worker heartbeat pipes, health socket), then acts: signals, reaping, liveness, keeping N
workers, leader duties, systemd notifications. No thread ever runs in this process, so fork is
safe. The store is opened here before the first fork and kept: every store records the pid that
opened its connections and a forked child opens its own (no connection crosses a fork)."""

from __future__ import annotations

import os
import selectors
import signal
import time
from typing import Any

import setproctitle

from tinyjobs import __version__
from tinyjobs import log as tjlog
from tinyjobs.holder import Holder
from tinyjobs.reaper import Reaper
from tinyjobs.storeguard import StoreGuard
from tinyjobs.urls import mask

from .appload import AppLoader
from .config import EXIT_BOOT, EXIT_OK, BootError, SupervisorConfig
from .health import HealthServer, judge
from .leader import Leader
from .notify import Notifier
from .pool import KILL_GRACE, Pool
from .signals import SignalQueue

TURN = 0.25  # while the store cannot be opened, the loop looks at signals this often
# Otherwise the loop sleeps until the next thing falls due (the leader's tick, a kill, a spawn
# after backoff, a hung worker's deadline, systemd's next message, a health client's deadline)
# or an event wakes it (a signal, a worker's report, a health client), and at most this long:
# a safety net, as every deadline is known. It used to wake every TURN: four turns a second
# that found nothing to do, in a process the harness counts as worker CPU.
TURN_AT_MOST = 1.0
STOP_NOW_GRACE = 3.0  # after SIGQUIT, workers get this long to hand their jobs back
# The leader's first tick (taking the lease, a reap, cron) waits until every worker has
# reported from its first turn (it has claimed), or this long after the store opened: at boot
# the workers' first claims and the leader's statements ran at once, on this machine's two
# cores and the store's, and nothing a worker does waits for the leader (the dead holders'
# leases were ended in _open_store already). A bound, so that workers that never boot do not
# keep the store untended.
LEADER_WAITS_AT_MOST = 1.0
STORE_RETRY = (0.5, 10.0)


class Arbiter:
    """`Arbiter(config).run()` supervises until asked to stop; returns the exit status."""

    def __init__(self, config: SupervisorConfig, log: Any = None) -> None:
        self.config = config
        self.log = log or tjlog.get_logger(pid=os.getpid(), role="supervisor")
        self.started = time.monotonic()
        self.state = "starting"
        self.exit_code = EXIT_OK
        self.stopping: str | None = None  # "drain" or "now"
        self.stop_deadline = 0.0
        self.selector = selectors.DefaultSelector()
        self.signals = SignalQueue()
        self.notifier = Notifier.from_environment()  # unsets NOTIFY_SOCKET before any fork
        self.loader = AppLoader(config.app_spec, config.url)
        self.health: HealthServer | None = None
        self.leader: Leader | None = None
        self.store_error: str | None = None  # why the store could not be opened, until it is
        self.pool = Pool(config, self.selector, self._inherited_fds, self.log)
        self._ready_sent = False
        self._wait = 0.0  # the first turn starts the workers at once; later ones: _next_wait
        self._leader_from: float | None = None  # until the leader's first tick: see LEADER_WAITS_AT_MOST
        self._next_status = 0.0
        self._next_extend = 0.0

    # -- life ----------------------------------------------------------------------------

    def run(self) -> int:
        """Boot, supervise, drain; the exit status (config.EXIT_*)."""
        try:
            self._boot()
            while not self._done():
                self._turn()
        except BootError as err:
            self.log.error("supervisor.boot_failed", error=mask(str(err)), exit=err.code)
            self.notifier.send(STATUS=f"boot failed: {mask(str(err))}")
            self.exit_code = err.code
        finally:
            self._close()
        self.log.info("supervisor.exited", exit=self.exit_code)
        return self.exit_code

    def _boot(self) -> None:
        setproctitle.setproctitle("tinyjobs: supervisor")
        self.signals.install()
        self.selector.register(self.signals.wake_fd, selectors.EVENT_READ, lambda fd, mask: None)
        self.app = self.loader.load()
        self.log.info(
            "supervisor.starting",
            url=mask(self.app.url),
            workers=self.config.workers,
            slots=self.config.slots,
            version=_version(),
        )
        if self.config.socket_path:
            self.health = HealthServer(self.config.socket_path, self.selector, self.document, self.log)
            self.health.open()
        if not self._open_store():
            return
        # Its first tick (the lease, a reap) comes after the workers are forked and have
        # claimed (LEADER_WAITS_AT_MOST): nothing they do waits for it.
        self.leader = Leader(self.app, Holder.current().id, self.config.leader_ttl, self.log)
        self._leader_from = time.monotonic() + LEADER_WAITS_AT_MOST
        self.state = "running"

    def _open_store(self) -> bool:
        """Open the store and end the leases of this host's dead processes (DUR-02), retrying
        with backoff while it is unreachable (health says why; the log says so once, and once
        when it answers); False when told to stop. No worker starts, so no READY=1, before."""
        guard = StoreGuard(self.log, patience=0.5, backoff=STORE_RETRY)

        def end_leases() -> int:
            return Reaper(self.app.store, self.app.clock.store_now, self.log).end_dead_holders()

        while self.stopping is None:
            ended = guard.call("open", end_leases)
            if ended is None:
                self.store_error = guard.error
                self.notifier.status(f"store unreachable, retrying: {self.store_error}")
                while self.stopping is None and not guard.ready():
                    self._poll(min(TURN, max(0.0, guard.retry_at - time.monotonic())))
                    self._handle_signals()
                continue
            self.store_error = None
            self.log.info("supervisor.store_ready", leases_ended=ended)
            return True
        return False

    def _done(self) -> bool:
        return self.stopping is not None and not self.pool.children

    def _turn(self) -> None:
        self._poll(self._wait)
        self._handle_signals()
        self.pool.reap(self.app, self.stopping is not None)
        now = time.monotonic()
        if self.pool.boot_failed and self.stopping != "now":
            self.log.error("supervisor.halt", reason="a worker failed to boot (worker.boot_failed)")
            self.exit_code = EXIT_BOOT
            self._stop("now")
        self.pool.check(now, self.stopping is not None)
        if self.stopping is None:
            self.pool.manage(self.app, now)
            if self.state == "reloading" and not self.pool.reloading():
                self.state = "running"
                self.log.info("supervisor.reloaded", generation=self.pool.generation)
        leader_in = self._lead(now)
        self._notify(now)
        if self.health is not None:
            self.health.expire(now)
        self._wait = self._next_wait(leader_in)

    def _lead(self, now: float) -> float:
        """The leader's tick when due; seconds until it is useful again."""
        if self.leader is None:
            return TURN_AT_MOST
        if self._leader_from is not None:
            if now < self._leader_from and not self.pool.all_booted() and self.stopping is None:
                return self._leader_from - now  # a worker's first report wakes the loop sooner
            self._leader_from = None
        return self.leader.tick()

    def _next_wait(self, leader_in: float) -> float:
        """Seconds until the loop's next turn falls due, at most TURN_AT_MOST: the earliest of
        the leader's next tick, the pool's deadlines, systemd's next message and a health
        client's deadline. Everything else (signals, SIGCHLD, a worker's report, a client)
        wakes the selector by itself."""
        now = time.monotonic()
        due = min(now + leader_in, now + TURN_AT_MOST, self.pool.next_due(now, self.stopping is not None))
        due = min(due, self._notify_due(now))
        if self.health is not None:
            due = min(due, self.health.next_deadline())
        return max(0.0, due - now)

    def _poll(self, timeout: float) -> None:
        for key, mask_ in self.selector.select(max(0.0, timeout)):
            key.data(key.fileobj, mask_)

    # -- signals -------------------------------------------------------------------------

    def _handle_signals(self) -> None:
        for signum in self.signals.pending():
            if signum in (signal.SIGTERM, signal.SIGINT):
                self.log.info("supervisor.signal", signal=signal.Signals(signum).name)
                self._stop("now" if self.stopping else "drain")
            elif signum == signal.SIGQUIT:
                self.log.info("supervisor.signal", signal="SIGQUIT")
                self._stop("now")
            elif signum == signal.SIGHUP:
                self.log.info("supervisor.signal", signal="SIGHUP")
                self._reload()
            # SIGCHLD only wakes the loop; reaping follows in this turn.

    def _stop(self, how: str) -> None:
        """drain: SIGTERM to every worker (they finish within the drain timeout and hand back
        the rest), SIGKILL after a grace. now: SIGQUIT (hand back at once), SIGKILL soon."""
        now = time.monotonic()
        if self.stopping == how or self.stopping == "now":
            return
        self.stopping, self.state = how, ("draining" if how == "drain" else "stopping")
        if how == "drain":
            self.stop_deadline = now + self.config.drain_timeout + KILL_GRACE
            self.pool.signal_all(signal.SIGTERM, self.stop_deadline)
        else:
            self.stop_deadline = min(self.stop_deadline or now + STOP_NOW_GRACE, now + STOP_NOW_GRACE)
            self.pool.signal_all(signal.SIGQUIT, self.stop_deadline)
        self.log.info("supervisor.stopping", how=how, workers=len(self.pool.children))
        self.notifier.stopping(self._status(), extend=self.stop_deadline - now + KILL_GRACE)
        self._next_extend = now + 1.0

    def _reload(self) -> None:
        """SIGHUP: import the app afresh, then replace the workers one by one (SUP-03)."""
        if self.stopping is not None or self.leader is None:
            return
        try:
            app = self.loader.reload()
            _ = app.store  # opened now: a reload onto an unreachable store keeps the old app
        except Exception as err:
            self.log.error("supervisor.reload_failed", error=mask(str(err)))
            self.last_reload = {"ok": False, "error": mask(str(err)), "at": time.time()}
            return
        self.last_reload = {"ok": True, "error": None, "at": time.time()}
        old, self.app = self.app, app
        self.leader.use_app(app)
        if old is not app:
            old.close()
        self.pool.generation += 1
        self.state = "reloading"
        self.log.info("supervisor.reloading", generation=self.pool.generation)

    # -- systemd and health ------------------------------------------------------------------

    def _notify(self, now: float) -> None:
        if self.stopping is not None:
            if now >= self._next_extend:
                self.notifier.extend(max(1.0, self.stop_deadline - now) + KILL_GRACE)
                self._next_extend = now + 1.0
            return
        self.notifier.watchdog(now)
        if not self._ready_sent and self.pool.all_booted():
            self._ready_sent = True
            self.notifier.ready(self._status())
            self.log.info("supervisor.ready", workers=len(self.pool.children))
        elif now >= self._next_status:
            self.notifier.status(self._status())
        if now >= self._next_status:
            self._next_status = now + 1.0

    def _notify_due(self, now: float) -> float:
        """When _notify has something to send next (never, without systemd)."""
        if not self.notifier.address:
            return float("inf")
        if self.stopping is not None:
            return self._next_extend
        due = self._next_status
        watchdog_in = self.notifier.watchdog_due()
        if watchdog_in is not None:
            due = min(due, watchdog_in)
        return due

    def _status(self) -> str:
        up = sum(1 for c in self.pool.children.values() if c.booted and not c.retiring)
        jobs = sum(c.beat.running for c in self.pool.children.values() if c.beat)
        role = ", leader" if self.leader and self.leader.leading else ""
        return f"{self.state}: {up}/{self.config.workers} workers, {jobs} jobs running{role}"

    def document(self) -> dict[str, Any]:
        """The health document (SUP-09): no secrets (the URL is masked)."""
        now = time.monotonic()
        children = sorted(self.pool.children.values(), key=lambda c: (c.number, c.pid))
        workers = [c.health(now) for c in children]
        leader = self.leader.health() if self.leader else self._before_leading()
        doc = {
            "pid": os.getpid(),
            "uptime": round(now - self.started, 3),
            "state": self.state,
            "version": _version(),
            "url": mask(self.app.url) if hasattr(self, "app") else None,
            "workers_expected": self.config.workers,
            "workers": workers,
            "last_reload": getattr(self, "last_reload", None),  # None: no reload yet
            **leader,
        }
        return judge(doc)

    def _before_leading(self) -> dict[str, Any]:
        """The leader's part of the health document while the store is not open yet."""
        return {
            "leader": False,
            "last_reap": None,
            "last_cron_tick": None,
            "store": {"reachable": False, "error": self.store_error, "since": None},
        }

    def _inherited_fds(self) -> list[int]:
        """What a forked child closes: the wake-up pipe, the health socket and its clients,
        the selector itself."""
        fds = [*self.signals.fds, *(self.health.fds() if self.health else [])]
        fileno = getattr(self.selector, "fileno", None)
        return fds + ([fileno()] if fileno else [])

    def _close(self) -> None:
        if self.leader is not None:
            self.leader.resign()
        if self.health is not None:
            self.health.close()
        if hasattr(self, "app"):
            self.app.close()
        self.signals.close()
        self.selector.close()


def _version() -> str:
    """tinyjobs.__version__, which tests/unit/test_startup_imports.py holds equal to the installed
    distribution's version: importlib.metadata (its import and the search of sys.path for the
    distribution) cost the supervisor ~15 ms of its start, before the first fork."""
    return __version__
