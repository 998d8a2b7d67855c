"""`tinyjobs verify URL`: prove the guarantees on the user's own store.

It starts `workers` real worker processes on a queue and namespace of its own, sends `rate`
jobs a second for `duration` seconds, stops a worker every `kill_every` seconds, SIGTERM and
SIGKILL in turn, and starts another in its place; then it waits up to `settle` seconds for the
store to settle (no job of its own pending or running), stops its workers, accounts for every
job by number against the ledger its workers wrote (verify/report.py), and purges its own jobs,
leaving only the store's schema behind, unless `keep` or other jobs appeared.

Exit status: 0 every promise held; 1 one did not (each cause on a `failed:` line); 2 before
anything runs, for a store refused or unreachable, `memory://`, a store that holds other jobs,
or settings that make no sense (`Refused`)."""

from __future__ import annotations

import secrets
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import cycle
from pathlib import Path
from typing import Any

from ..app import App
from ..holder import host_id
from ..job import LIVE_STATES, Job
from ..stores.base import Store
from ..urls import mask
from .fleet import Fleet
from .ledger import Ledger, create, read
from .report import Sent, Verdict, render, tally
from .settings import Refused, Settings, new_sqlite_file, open_checked, settings
from .worker import DRAIN_TIMEOUT, ENV_LEASE, ENV_LEDGER, ENV_QUEUE, ENV_SLOTS, TASK

__all__ = ["Refused", "Result", "Settings", "Verifier", "open_checked", "settings", "verify"]

READY_TIMEOUT = 60.0  # workers must be up (each has claimed once) before the load starts
STOP_TIMEOUT = DRAIN_TIMEOUT + 5.0
FAR_FUTURE = 100 * 365 * 86400.0
POLL = 0.05


@dataclass
class Result:
    """The exit status, the report's lines and the causes of a failure."""

    code: int
    lines: list[str]
    causes: list[str] = field(default_factory=list)


def verify(
    s: Settings, stop: threading.Event | None = None, note: Callable[[str], None] | None = None
) -> Result:
    """Run a whole verify on settings `s` (Refused, exit 2, before anything runs). Setting
    `stop` cuts the run short: the workers stop, the jobs are accounted for, and it fails."""
    created = new_sqlite_file(s)
    store = open_checked(s)
    try:
        verifier = Verifier(s, store, stop, note)
        verifier.created = created
        return verifier.run()
    finally:
        store.close()


class Verifier:
    """One run of verify against an opened store that holds no other jobs."""

    def __init__(
        self,
        s: Settings,
        store: Store,
        stop: threading.Event | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.s, self.store = s, store
        self.stop = stop or threading.Event()
        self.note = note or (lambda text: print(text, file=sys.stderr, flush=True))
        self.run_id = secrets.token_hex(4)
        self.app = App(store)
        self.sent = Sent()
        self.store_errors: list[str] = []
        self.settled, self.live_left = True, 0
        self.boot_error: str | None = None
        self.created: str | None = None  # a store file this run created, for the report

    def job_id(self, n: int) -> str:
        return f"verify:{self.run_id}:{n}"

    # -- the run --------------------------------------------------------------------------

    def run(self) -> Result:
        directory = Path(tempfile.mkdtemp(prefix="tinyjobs-verify-"))
        create(directory / "ledger.db")
        env = {
            "TINYJOBS_URL": self.s.store_url,
            ENV_QUEUE: self.s.queue,
            ENV_LEASE: repr(self.s.lease),
            ENV_LEDGER: str(directory / "ledger.db"),
            ENV_SLOTS: str(self.s.slots),
        }
        fleet = Fleet(self.s.workers, directory, env, STOP_TIMEOUT, READY_TIMEOUT)
        self.note(self.s.describe())
        try:
            self._drive(fleet)
        finally:
            fleet.stop_all()
        result = self._finish(fleet, directory / "ledger.db")
        if result.code == 0:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            self.note(f"verify: the workers' logs and the ledger are kept in {directory}")
        return result

    def _drive(self, fleet: Fleet) -> None:
        fleet.start()
        if not fleet.wait_ready(READY_TIMEOUT, self.stop.is_set):
            if not self.stop.is_set():
                self.boot_error = f"the workers were not up within {READY_TIMEOUT:g} s"
            return
        t0 = time.monotonic()
        sender = threading.Thread(target=self._send, args=(t0,), name="verify-sender", daemon=True)
        sender.start()
        self._chaos(fleet, t0, sender)
        sender.join()
        if not self.stop.is_set():
            self._settle(fleet)

    def _send(self, t0: float) -> None:
        """Send `rate` jobs a second, numbered from 1, until the duration is over or stop."""
        for i in range(self.s.total):
            n = i + 1
            if self.stop.wait(max(0.0, t0 + i / self.s.rate - time.monotonic())):
                return
            self.sent.at[n] = time.time()
            self.sent.total += 1
            try:
                job = self.app.enqueue(TASK, {"n": n}, id=self.job_id(n), queue=self.s.queue)
            except Exception as err:
                self.sent.failed[n] = _first_line(mask(f"{type(err).__name__}: {err}"))
                continue
            self.sent.acked.add(n)
            if not job.created:
                self.sent.existed.add(n)

    def _chaos(self, fleet: Fleet, t0: float, sender: threading.Thread) -> None:
        """Every `kill_every` seconds of the load, stop a worker, SIGTERM and SIGKILL in turn,
        and start another in its place; meanwhile record workers that die on their own."""
        signals = cycle([signal.SIGTERM, signal.SIGKILL])
        k = 1
        while sender.is_alive() and not self.stop.is_set():
            fleet.check_deaths()
            due = t0 + k * self.s.kill_every
            if due < t0 + self.s.duration and time.monotonic() >= due:
                fleet.kill(next(signals))
                k += 1
            self.stop.wait(POLL / 2)

    def _settle(self, fleet: Fleet) -> None:
        """Wait up to `settle` seconds until no job of verify's queue is pending or running."""
        deadline = time.monotonic() + self.s.settle
        while not self.stop.is_set():
            fleet.check_deaths()
            try:
                self.live_left = self._live()
            except Exception as err:
                self._store_failed("while settling", err)
            if self.live_left == 0 and not self.store_errors:
                return
            if time.monotonic() >= deadline:
                self.settled = False
                return
            self.stop.wait(POLL * 2)

    def _live(self) -> int:
        counts = self.store.counts().get(self.s.queue, {})
        return sum(number for state, number in counts.items() if state in LIVE_STATES)

    def _store_failed(self, when: str, err: Exception) -> None:
        text = _first_line(mask(f"{when}: {type(err).__name__}: {err}"))
        if text not in self.store_errors:
            self.store_errors.append(text)

    # -- the accounting -------------------------------------------------------------------

    def _finish(self, fleet: Fleet, ledger_path: Path) -> Result:
        ledger, ledger_error = self._read_ledger(ledger_path)
        jobs, foreign, others = self._listing()
        verdict = Verdict(
            run=self.run_id,
            fleet=fleet.record,
            ledger_error=ledger_error,
            settled=self.settled,
            live_left=self.live_left,
            cut_short=self.stop.is_set(),
            others=others,
            keep=self.s.keep,
            created=self.created,
        )
        verdict.left = self._cleanup(jobs, fleet.all_pids, others)
        worker_errors = fleet.store_errors()
        if worker_errors:
            self.store_errors.append(f"the workers logged {worker_errors} store errors")
        verdict.store_errors = self.store_errors
        t = tally(self.sent, jobs, ledger, foreign)
        lines, causes = render(self.sent, t, verdict)
        if self.boot_error:
            causes.insert(0, self.boot_error)
            lines[5:] = [f"failed: {c}" for c in causes]
        return Result(1 if causes else 0, lines, causes)

    def _read_ledger(self, path: Path) -> tuple[Ledger | None, str | None]:
        try:
            return read(path), None
        except (sqlite3.Error, OSError) as err:
            return None, f"{type(err).__name__}: {err}"

    def _listing(self) -> tuple[dict[int, Job] | None, list[str], int]:
        """verify's jobs by number (None when the store cannot be read), the ids in its queue
        that are not its own, and how many jobs of the namespace are not its own."""
        prefix = f"verify:{self.run_id}:"
        try:
            listing = self.store.jobs(queue=self.s.queue, limit=self.s.total + 10_000)
            everything = sum(sum(states.values()) for states in self.store.counts().values())
        except Exception as err:
            self._store_failed("reading the jobs at the end", err)
            return None, [], 0
        jobs: dict[int, Job] = {}
        foreign: list[str] = []
        for job in listing:
            number = job.id[len(prefix) :] if job.id.startswith(prefix) else ""
            if number.isdigit():
                jobs[int(number)] = job
            else:
                foreign.append(job.id)
        return jobs, foreign, everything - len(jobs)

    def _cleanup(self, jobs: dict[int, Job] | None, pids: list[int], others: int) -> int:
        """Purge verify's own jobs, unless --keep or other jobs appeared (or the store could
        not be read); return how many jobs of verify's are left in the store."""
        if jobs is None or self.s.keep or others:
            return len(jobs or {})
        try:
            return self._purge(jobs, pids)
        except Exception as err:
            self._store_failed("purging verify's jobs", err)
            return len(jobs)

    def _purge(self, jobs: dict[int, Job], pids: list[int]) -> int:
        store = self.store
        ours = [h for h in store.holders(host_id()) if h.pid in set(pids)]
        if ours:
            store.end_leases(ours)  # leases of workers verify stopped: nothing holds them now
        for job in jobs.values():
            if job.state in LIVE_STATES:
                store.cancel(job.id)
        # The Store protocol deletes final jobs only by age: with no other job in the
        # namespace, a far-future `now` makes every final job (all of them verify's) old enough.
        far = store.now() + FAR_FUTURE
        for _ in range(len(jobs) // 1000 + 10):  # bounded: a row that will not go stays
            if not store.purge(far, 1000):
                break
        return sum(sum(states.values()) for states in store.counts().values())


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else text


def run_cli(s: Settings, echo: Callable[[str], Any]) -> int:
    """What the CLI runs: verify with SIGINT cutting the run short; returns the exit status."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        result = verify(s, stop)
    finally:
        signal.signal(signal.SIGINT, previous)
    for line in result.lines:
        echo(line)
    return result.code
