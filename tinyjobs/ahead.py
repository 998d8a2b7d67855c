"""Claiming ahead: while a worker's jobs are short, it claims jobs beyond its free slots and
holds them, so that its slots keep running while its loop waits on the store's cycle (a claim
must be durable before its jobs start: on PostgreSQL a commit's flush, on SQLite an fsync).

`Ahead` owns the slots' accounting: `busy`, the jobs started whose handler has not returned,
and the deque of jobs held (claimed, not started), under one small lock taken by the worker's
loop and its slot threads. Its contract:

- When: `extra()` jobs are claimed beyond the free slots: `AHEAD` x `slots` once the last
  `slots` jobs settled ran short (within the average claiming call, `SHORT_FLOOR` at least)
  and none running has run longer; none for a worker of a queue with a limit (a held job is
  a lease, and a rate counts claims as starts), none while the worker stops, none once a job
  ran long (jobs held behind a long one would wait for it, while other workers could run
  them: Celery's prefetch complaint). The worker counts held jobs among those in hand, so a
  claim never goes past what --max-jobs leaves.
- Started: `place()` gives a claimed job a free slot or holds it; a slot thread whose job
  returned starts the next held one itself (`run_in_slot`), and the loop starts held jobs in
  slots freed without a slot thread (an async job, a job that ended at once: `mind()`). Never
  more than `slots` started at once, and none once the worker stops.
- Handed back: every held job, once the oldest has waited `HOLD_FOR` without a slot (`mind()`:
  the slots run long jobs; claiming ahead then stops until short jobs come back), and at a
  drain (`take_all()`). The worker hands them back unrun; a SIGKILLed worker's held jobs are
  the reaper's, like its running ones (their leases are renewed with the running ones').

Held jobs are the worker's entries (`Entry`: its `Running`), in its `running` too, `held` True
until started.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .stores.base import QueuePolicy

if TYPE_CHECKING:
    from .execution import Attempt, Ending
    from .slots import Inbox

# A job claimed ahead and not started within HOLD_FOR (every slot kept busy that long: the jobs
# are not short any more) is handed back for other workers. Far above a store cycle (a few ms),
# far below what a job held behind a long one would wait.
HOLD_FOR = 0.05
# A job is short when it ran within a store cycle (the worker's average claiming call) or
# within this floor, whichever is longer: a job held behind short ones waits no longer than
# that. Wall time, so a no-op job that waited for the GIL on a loaded machine still counts as
# short (1 ms did not: it turned claiming ahead off now and then).
SHORT_FLOOR = 0.01
# While jobs are short, a worker holds up to this many times its slots claimed ahead, so that
# slots emptying while a store cycle is in flight still find held jobs. Once (pg-prefetch's
# bound) left the PostgreSQL drain at ~13 jobs a claiming call; twice takes ~19 and drained
# 1.24x faster than once, four times was level with twice (docs/measured.md, worker-ahead).
# Held jobs are handed back once the oldest has waited HOLD_FOR, whatever their number.
AHEAD = 2


def limited(policies: Iterable[QueuePolicy]) -> bool:
    """Whether any of `policies` limits its queue (concurrency or rate, per queue or group)."""
    return any(
        p.concurrency is not None
        or p.rate is not None
        or p.group_concurrency is not None
        or p.group_rate is not None
        for p in policies
    )


class Entry(Protocol):
    """What `Ahead` reads and writes of a job in hand (the worker's `Running`)."""

    held: bool  # claimed ahead, not started yet
    started: float  # monotonic: when it started, or while held when it was claimed
    ran: float  # seconds its handler ran, set as it returns (0.0 until then)


E = TypeVar("E", bound=Entry)


class Ahead(Generic[E]):
    """The slots of one worker and the jobs it holds claimed ahead of them (see the module)."""

    def __init__(self, slots: int, policies: Iterable[QueuePolicy], stopping: Callable[[], bool]) -> None:
        """`stopping`: whether the worker stops (then no held job starts: the drain hands them back)."""
        self.slots = slots
        self._stopping = stopping
        self._may_hold = not limited(policies)
        self._lock = threading.Lock()
        self._held: deque[E] = deque()
        self._busy = 0
        self._short_run = 0  # jobs in a row (the latest settled) that ran short
        self.cycle = 0.0  # the average seconds of the worker's claiming store calls

    def __len__(self) -> int:
        """Jobs held (a read without the lock: a count, for sizing and reporting)."""
        return len(self._held)

    def held(self) -> list[E]:
        """The jobs held now, oldest first."""
        with self._lock:
            return list(self._held)

    # -- how many -----------------------------------------------------------------------------

    def extra(self, now: float, running: Iterable[E]) -> int:
        """How many jobs to claim beyond the free slots, with `running` the jobs in hand."""
        if not self._may_hold or self._short_run < self.slots or self._stopping():
            return 0
        since = now - max(self.cycle, SHORT_FLOOR)
        for entry in running:
            if not entry.held and not entry.ran and entry.started < since:
                return 0  # a job runs long now
        return AHEAD * self.slots

    def timed_cycle(self, began: float) -> None:
        """Note a claiming store call, begun at `began`, in the average cycle."""
        self.cycle += (time.monotonic() - began - self.cycle) * 0.2

    def note_runs(self, finished: Iterable[tuple[E, Ending | None]]) -> None:
        """Count the jobs in a row that ran short, from `finished` (oldest first)."""
        short, run = max(self.cycle, SHORT_FLOOR), self._short_run
        for entry, _ in finished:
            run = run + 1 if entry.ran <= short else 0
        self._short_run = run

    # -- slots --------------------------------------------------------------------------------

    def place(self, entry: E) -> bool:
        """A claimed job: True with a slot taken for it (the caller starts it), or False, held
        (`entry.held` set) until a slot frees up."""
        with self._lock:
            if self._busy >= self.slots:  # claimed ahead: every slot has a job
                entry.held = True
                self._held.append(entry)
                return False
            self._busy += 1
            return True

    def free_slot(self) -> None:
        """A started job's slot is free (its handler returned without a slot thread to take the
        next held job: an async job, or one that ended at once)."""
        with self._lock:
            self._busy -= 1

    def next(self, release: bool) -> E | None:
        """The next held job, its slot taken, or None (none held, every slot busy, or the
        worker stops). `release`: the caller's job returned, its slot is free."""
        with self._lock:
            if release:
                self._busy -= 1
            if not self._held or self._busy >= self.slots or self._stopping():
                return None
            self._busy += 1
            return self._held.popleft()

    def run_in_slot(
        self,
        entry: E,
        attempt: Attempt,
        begin: Callable[[E], Attempt | None],
        finished: Inbox,
    ) -> None:
        """(A slot thread's.) Run the job, then, while jobs are held and the worker does not
        stop, the next of them in this same slot, without waiting for the loop (which may be
        in its store cycle). `begin` starts a held job whose slot was taken: its Attempt to run
        here, or None when it went elsewhere (async) or ended at once. Each result goes to
        `finished`; the last one without a wake-up: the caller decides who settles it."""
        while True:
            ending = attempt.run_sync()
            entry.ran = max(time.monotonic() - entry.started, 1e-9)
            finished.add((entry, ending))
            nxt = self.next(release=True)
            while nxt is not None:
                finished.nudge()  # the loop settles what finished while this slot goes on
                begun = begin(nxt)
                if begun is not None:
                    entry, attempt = nxt, begun
                    break
                nxt = self.next(release=False)  # async or ended at once: the next one
            else:
                return

    # -- waiting too long, and stopping --------------------------------------------------------

    def due_by(self) -> float | None:
        """When the oldest held job has waited HOLD_FOR (the loop must turn by then), or None."""
        if not self._held:  # most turns: nothing held, no lock taken
            return None
        with self._lock:
            return self._held[0].started + HOLD_FOR if self._held else None

    def mind(self, now: float, launch: Callable[[E], Any]) -> list[E]:
        """(The loop's.) `launch` held jobs in slots that are free (freed without a slot thread
        to take the next); then, once the oldest has waited HOLD_FOR, take every held job out
        and return them, to be handed back (the slots are kept busy by jobs that are not short
        and other workers may be free): claiming ahead stops until short jobs come back."""
        while (entry := self.next(release=False)) is not None:
            launch(entry)
        due = self.due_by()
        if due is None or now < due:
            return []
        self._short_run = 0
        return self.take_all()

    def take_all(self) -> list[E]:
        """Every held job, taken out (to be handed back unrun: a drain, or `mind`)."""
        with self._lock:
            batch, self._held = list(self._held), deque()
        return batch
