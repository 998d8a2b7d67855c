"""The memory store's indexes: its rows by stored state, the pending ones of each queue in claim
order, and the final ones by the time they may be purged.

They make the worker's path cost what it takes, not what the store holds: a claim pops the
heads of its queues' heaps instead of sorting every pending row, counting running rows or
releasing dependents walks the running or blocked rows only, and purge pops the rows whose
window ended (docs/measured.md, "Flat as the store grows").

Only MemoryStore changes them, under its lock, through `add` and `remove` around every change of
a row's state (MemoryStore._set). Heap entries are never removed in place: each carries the
row's `mark` when it was pushed, and `remove` clears the mark, so an entry whose row has since
changed (claimed, cancelled, deleted, made pending again) is stale and dropped when it surfaces.
"""

from __future__ import annotations

import itertools
from heapq import heappop, heappush

from tinyjobs.job import BLOCKED, RUNNING

from ..rules import PENDING
from .rows import Row

# (-priority, due, seq, mark, id): JOB-01's claim order; seq is unique, so ties end there.
Ready = tuple[int, float, int, int, str]
Timed = tuple[float, int, str]  # (time, mark, id)


class Index:
    """Rows by stored state, per queue where a claim needs it. See the module docstring."""

    def __init__(self) -> None:
        self.pending: dict[str, dict[str, Row]] = {}  # queue -> id -> pending row
        self.running: dict[str, Row] = {}
        self.blocked: dict[str, Row] = {}
        self.counts: dict[str, dict[str, int]] = {}  # queue -> stored state -> rows
        self._timed: dict[str, list[Timed]] = {}  # queue -> pending rows by due time
        self._ready: dict[str, list[Ready]] = {}  # queue -> pending rows found due, claim order
        self._expiry: list[Timed] = []  # final rows by the time they may be purged
        self._marks = itertools.count(1)

    def add(self, row: Row) -> None:
        """Index `row` in its current state (it must not be indexed already)."""
        by_state = self.counts.setdefault(row.queue, {})
        by_state[row.state] = by_state.get(row.state, 0) + 1
        if row.state == PENDING:
            row.mark = next(self._marks)
            self.pending.setdefault(row.queue, {})[row.id] = row
            heappush(self._timed.setdefault(row.queue, []), (row.due, row.mark, row.id))
        elif row.state == RUNNING:
            self.running[row.id] = row
        elif row.state == BLOCKED:
            self.blocked[row.id] = row
        elif row.expires_at is not None:  # final
            row.mark = next(self._marks)
            heappush(self._expiry, (row.expires_at, row.mark, row.id))

    def remove(self, row: Row) -> None:
        """Forget `row` as it is now, before its state changes or it is deleted."""
        by_state = self.counts[row.queue]
        by_state[row.state] -= 1
        if not by_state[row.state]:
            del by_state[row.state]
            if not by_state:
                del self.counts[row.queue]
        if row.state == PENDING:
            self.pending[row.queue].pop(row.id, None)
        elif row.state == RUNNING:
            self.running.pop(row.id, None)
        elif row.state == BLOCKED:
            self.blocked.pop(row.id, None)
        row.mark = 0  # its heap entries are stale from now on

    # -- claim ----------------------------------------------------------------------------------

    def head(self, queue: str, now: float) -> Ready | None:
        """The entry of the queue's first pending row due by `now` in claim order, or None.
        Rows that became due since the last look move to the ready heap first."""
        pending = self.pending.get(queue)
        if not pending:
            return None
        timed, ready = self._timed.setdefault(queue, []), self._ready.setdefault(queue, [])
        while timed and timed[0][0] <= now:
            _, mark, job_id = heappop(timed)
            row = pending.get(job_id)
            if row is not None and row.mark == mark:
                heappush(ready, (-row.priority, row.due, row.seq, mark, job_id))
        while ready:
            entry = ready[0]
            row = pending.get(entry[4])
            if row is None or row.mark != entry[3]:
                heappop(ready)  # stale
            elif row.due > now:  # a claim at an earlier `now` than the one that moved it
                heappop(ready)
                heappush(timed, (row.due, row.mark, row.id))
            else:
                return entry
        return None

    def pop(self, queue: str) -> Row:
        """Take the entry `head(queue, now)` just returned off its heap; its row."""
        entry = heappop(self._ready[queue])
        return self.pending[queue][entry[4]]

    def put_back(self, queue: str, entry: Ready) -> None:
        """Return an entry popped for a row that a limit set aside (it stays pending)."""
        heappush(self._ready[queue], entry)

    # -- purge ----------------------------------------------------------------------------------

    def expired(self, rows: dict[str, Row], now: float, limit: int) -> list[Row]:
        """Up to `limit` final rows past their window at `now`, earliest window first. The
        caller deletes them: their entries are gone from the heap."""
        found: list[Row] = []
        while self._expiry and self._expiry[0][0] <= now and len(found) < limit:
            _, mark, job_id = heappop(self._expiry)
            row = rows.get(job_id)
            if row is not None and row.mark == mark and row.purgeable(now):
                found.append(row)
        return found
