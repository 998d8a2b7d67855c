"""The Store protocol: everything tinyjobs asks of a store, each operation one atomic step.

Every operation takes `now` (epoch seconds). `None` means the store's own clock: the process
clock for SQLite and memory, the server's clock for PostgreSQL and Redis, so that a worker with
a skewed clock cannot steal or lose leases (CLK-01). Tests pass explicit values to move time.

A lease is its attempt. `claim` counts the attempt and hands out a token; every later write of
that attempt (`renew`, `save_step`, `settle`) names the token and changes nothing once the lease
was lost, that is once it expired and was reaped, or was ended because its holder died (JOB-05).

Stores declare what they can do in `capabilities`:
- "transactions": `enqueue(conn=...)` writes inside the caller's open transaction (JOB-02).
- "notify": `wait` wakes at once on a change made by another process.
- "shared": several processes (and hosts, for servers) can share the store.
- "timed": `wait` also returns by the time the earliest scheduled job of its queues falls due,
  so a worker whose queues have no limits claims by the clock only rarely (worker.py).
- "wakes_one": `wait` wakes one waiting thread per piece of news, not every waiter (a Redis
  blocking pop, a SQLite token in a FIFO), so a worker keeps a second thread waiting while the
  one the news woke runs a lone job (storewatch.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import StoreError
from ..holder import Holder
from ..job import Job

DEFAULT_LEASE = 30.0
DEFAULT_ATTEMPTS = 20
DEFAULT_DEDUPE = 86400.0
DEFAULT_KEEP = 7 * 86400.0
DEFAULT_QUEUE = "default"

SettleOutcome = Literal["done", "retry", "snooze", "fail", "handback"]


@dataclass(frozen=True)
class QueuePolicy:
    """What a claim must respect for one queue. Limits are counted by the store, across all
    processes, in the same atomic step that takes the leases (LIM-01..03).

    `rate` and `group_rate` are (starts, period in seconds)."""

    name: str
    lease: float = DEFAULT_LEASE
    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    group_concurrency: int | None = None
    group_rate: tuple[int, float] | None = None


@dataclass(frozen=True)
class NewJob:
    """A job to add. `payload` is the JSON text of the keyword arguments, already checked.

    Due time: `at` (absolute epoch seconds) when given, else the store's `now` plus `delay`."""

    id: str
    task: str
    queue: str = DEFAULT_QUEUE
    payload: str = "{}"
    priority: int = 0
    delay: float = 0.0
    at: float | None = None
    key: str | None = None
    group: str | None = None
    after: tuple[str, ...] = ()
    max_attempts: int = DEFAULT_ATTEMPTS
    dedupe: float = DEFAULT_DEDUPE
    keep: float = DEFAULT_KEEP


_new_object = object.__new__
_set_attribute = object.__setattr__


def filled(template: NewJob, job_id: str, payload: str) -> NewJob:
    """`dataclasses.replace(template, id=job_id, payload=payload)` at a tenth of its cost, as
    an enqueue builds one per job: the frozen dataclass's __init__ sets each of the 13 fields
    through object.__setattr__, where this copies the template's instance dict in one call.

    Equal to what __init__ builds (same fields, values, equality, hash and repr) as long as
    NewJob keeps its instance __dict__ (no slots) and has no __post_init__;
    tests/unit/test_app_fill.py holds both."""
    fields = template.__dict__.copy()
    fields["id"] = job_id
    fields["payload"] = payload
    job = _new_object(NewJob)
    _set_attribute(job, "__dict__", fields)
    return job


@dataclass(frozen=True)
class Claimed:
    """A claimed job: the snapshot (state running, `attempts` already counted), the lease token
    that fences this attempt, the lease length in seconds, and the steps kept by earlier
    attempts (name -> JSON text)."""

    job: Job
    token: str
    lease: float
    steps: dict[str, str] = field(default_factory=dict)


# Built once per attempt on the worker's hot path: a plain slotted class, as a frozen
# dataclass's __init__ costs several times more. Treat it as a value all the same.
@dataclass(slots=True)
class Settlement:
    """How an attempt ended, named by its token.

    - done: state done with `result` (JSON text); kept for the job's `dedupe`.
    - retry: `error` recorded; if the job has used `max_attempts` it fails for good, else it
      waits `delay` seconds (the attempt stays counted).
    - snooze: waits `delay` seconds; the attempt is given back.
    - fail: fails for good now with `error`.
    - handback: a drain gives the job back: due again at once, the attempt given back.
    A job whose cancellation was requested while it ran ends `cancelled` unless it is done.
    `execution` overrides the outcome recorded on the execution (e.g. "timeout")."""

    job_id: str
    token: str
    outcome: SettleOutcome
    result: str | None = None
    error: str | None = None
    delay: float = 0.0
    execution: str | None = None


LeaseStatus = Literal["ok", "lost", "cancel"]

BROWSE_MAX = 500  # the most jobs one browse page may ask for


@dataclass(frozen=True)
class JobFilter:
    """Which jobs `browse` lists; every field given must match (None matches all).

    `state` is a reported state (job.STATES: scheduled and waiting are split by due time);
    `text` matches a job whose id starts with it, or whose arguments (JSON text) or error
    contain it, case-sensitively."""

    state: str | None = None
    queue: str | None = None
    task: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class QueueStats:
    """One queue at a glance: reported state -> number of jobs (states with none left out),
    the due time of its oldest waiting (due) job, and whether it is paused (LIM-04).
    `estimated`: the counts of the final states (done, failed, cancelled) are estimates (a
    store too large to count them at each request; the live states are always exact).
    `past_lease`: running jobs whose lease expired (lease_expires <= now) and that no reaper
    has returned yet: their worker is gone or stalled."""

    name: str
    counts: dict[str, int]
    oldest_due_at: float | None
    paused: bool
    estimated: bool = False
    past_lease: int = 0


@dataclass(frozen=True)
class ExecutionStats:
    """Finished executions still on record of one (queue, outcome): how many, the sum of their
    durations in seconds, and cumulative counts per upper bound (`le`) of the bounds asked."""

    queue: str
    outcome: str
    count: int
    seconds: float
    buckets: tuple[int, ...]


@dataclass(frozen=True)
class WorkerBeat:
    """A worker process's heartbeat: where it runs, what it takes, how busy it is.
    `seen_at` is set by the store on `beat`, `lost` by `workers`."""

    host: str
    pid: int
    queues: tuple[str, ...]
    slots: int
    busy: int
    started_at: float
    seen_at: float = 0.0
    lost: bool = False


@runtime_checkable
class Store(Protocol):
    """One store of jobs. Implementations: memory, sqlite, postgres, redis.

    Every method is one atomic operation: it happens wholly or not at all, whatever other
    processes do at the same time. Methods are safe to call from several threads."""

    url: str
    capabilities: frozenset[str]

    def now(self) -> float:
        """The store's clock, in epoch seconds."""
        ...

    def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        """Add jobs, in one atomic step, and return their snapshots in order.

        An id that exists and is live (waiting, scheduled, blocked, running) or done within
        its dedupe window adds nothing; a key (`NewJob.key`) held by a live job adds nothing;
        both return the existing job with `created` False (JOB-09). A failed or cancelled
        job's id is replaced by the new job. `after` names jobs this one runs after: the job
        is blocked until all of them are done, cancelled at once if one already failed or was
        cancelled, and due at once if all are done (DEP-01); an id that does not exist raises
        JobNotFound and nothing is added.

        With `conn`, the rows are written through the caller's connection inside the caller's
        open transaction and exist exactly when it commits (JOB-02); stores without the
        "transactions" capability raise NotSupported."""
        ...

    def claim(
        self,
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> list[Claimed]:
        """Take leases on up to `limit` due jobs of `queues`, in one atomic step.

        Order: higher priority first, then earlier due time, then enqueue order (JOB-01).
        Each claimed job becomes running, its `attempts` grows by one (JOB-03), a new
        execution is recorded with the holder, and its lease runs until now + the queue's
        lease. Limits of each QueuePolicy are counted in the same step (LIM-01..03)."""
        ...

    def renew(self, tokens: Sequence[str], now: float | None = None) -> dict[str, LeaseStatus]:
        """Extend each live lease to now + its lease length, in one step; report per token:
        "ok", "lost" (expired and reaped, ended, or settled), or "cancel" (renewed, but the
        job's cancellation was requested)."""
        ...

    def save_step(self, token: str, name: str, value: str, now: float | None = None) -> bool:
        """Keep a step's value (JSON text) under the job; False, writing nothing, when the lease
        of `token` is lost (JOB-05, JOB-06)."""
        ...

    def settle(self, settlements: Sequence[Settlement], now: float | None = None) -> list[bool]:
        """Apply settlements in one atomic step (group commit); each is True when applied and
        False when its lease was already lost (then it changes nothing)."""
        ...

    def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        """`settle(settlements)` then `claim(queues, holder, limit)`, the worker's cycle: one
        transaction where the store can (one fsync for both on SQLite), else the two atomic
        steps in turn (`settle_then_claim`). The claim counts limits after the settlements, so
        a place freed by them can be taken at once."""
        ...

    def reap(self, now: float | None = None, limit: int = 1000) -> int:
        """Return jobs whose lease expired to waiting (or to failed when they used their
        attempts, or to cancelled when cancellation was requested); their executions end as
        "lease expired". Returns how many (JOB-04)."""
        ...

    def holders(self, host: str) -> list[Holder]:
        """The distinct holders on `host` (a Holder.host) that hold live leases."""
        ...

    def end_leases(self, holders: Sequence[Holder], now: float | None = None) -> int:
        """End every lease of these holders at once, as `reap` does, with their executions
        ending as "worker lost" (DUR-02). Returns how many jobs."""
        ...

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        """Cancel a job (JOB-08). A job not yet running is removed (jobs that run after it are
        cancelled on record); a running one is marked, its worker learns at the next renewal,
        and it never runs again. False when there is nothing to cancel (unknown or final)."""
        ...

    def retry(self, job_id: str, now: float | None = None) -> bool:
        """Make a failed or cancelled job due again now with a fresh budget of attempts.
        False for any other state or an unknown id."""
        ...

    def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        """The job's snapshot, with `ahead` for a pending job (JOB-11) and, when asked, its
        executions oldest first. None when there is no such job."""
        ...

    def jobs(
        self,
        state: str | None = None,
        queue: str | None = None,
        limit: int = 100,
        now: float | None = None,
        newest: bool = False,
        offset: int = 0,
    ) -> list[Job]:
        """Jobs in a state (all states when None), optionally of one queue, oldest first (newest
        first with `newest`), skipping the first `offset` of that order."""
        ...

    def counts(self, now: float | None = None) -> dict[str, dict[str, int]]:
        """queue -> state -> number of jobs, for health, CLI and verify."""
        ...

    def purge(self, now: float | None = None, limit: int = 1000) -> int:
        """Remove done jobs past their dedupe window and failed or cancelled ones past `keep`,
        with their executions and steps (JOB-10). Returns how many jobs."""
        ...

    def fire_cron(self, schedule: str, due: float, job: NewJob, now: float | None = None) -> bool:
        """Enqueue `job` for the schedule's due time `due`, once (CRON-01): in one atomic step,
        when `due` is later than the last due time fired for `schedule`, record `due` and add
        the job; True when this call fired it. Any number of processes may call it for the
        same due time: exactly one fires."""
        ...

    def cron_last(self, schedule: str) -> float | None:
        """The last due time fired for `schedule`, or None when it never fired."""
        ...

    def lead(self, name: str, holder: str, ttl: float, now: float | None = None) -> bool:
        """Take or renew the named leadership lease for `ttl` seconds; True while `holder` has it."""
        ...

    def resign(self, name: str, holder: str) -> None:
        """Give up the named leadership lease if `holder` has it."""
        ...

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """Block until jobs of `queues` may have changed or `timeout` seconds passed; True when
        woken by a change. Cheap when idle; spurious wake-ups are allowed."""
        ...

    # -- the dashboard's and metrics' operations (docs/store-contract.md) ---------------------

    def browse(
        self,
        filter: JobFilter,
        cursor: str | None = None,
        limit: int = 50,
        now: float | None = None,
    ) -> tuple[list[Job], str | None]:
        """One page of the jobs that match `filter`, newest first (by (created_at, id); SQLite
        and PostgreSQL by enqueue order, `seq`: the same order whenever created_at grows with the
        enqueues), and the cursor of the next page (None on the last). The cursor is opaque text
        naming the last row read, so paging stays correct while jobs change state or new ones
        arrive; a filtered page may come back short with a cursor (docs/store-contract.md).
        `limit` is 1..BROWSE_MAX; a bad state, limit or cursor raises ConfigError."""
        ...

    def dependents(self, job_id: str, limit: int = 100) -> list[Job]:
        """Jobs enqueued `after` this one (still on record), in enqueue order."""
        ...

    def steps(self, job_id: str) -> dict[str, str]:
        """The job's kept step values, name -> JSON text ({} for an unknown job)."""
        ...

    def queue_stats(self, now: float | None = None) -> list[QueueStats]:
        """Every queue that has jobs or is paused, by name."""
        ...

    def finished_series(
        self, since: float, step: float = 60.0, now: float | None = None
    ) -> list[tuple[float, str, int]]:
        """Executions that ended in [since, now], counted per (bucket start, outcome), buckets of
        `step` seconds from `since`; only non-empty buckets, oldest first."""
        ...

    def execution_stats(self, bounds: Sequence[float], now: float | None = None) -> list[ExecutionStats]:
        """Per (queue, outcome), the ended executions still on record: count, total seconds, and
        cumulative counts per bound in `bounds` (ascending seconds)."""
        ...

    def pause(self, queue: str) -> None:
        """LIM-04: from the moment this returns, no claim of any process takes a job of `queue`;
        running jobs finish. Stored: it survives restarts. Pausing twice is the same as once."""
        ...

    def resume(self, queue: str) -> None:
        """Make a paused queue's jobs claimable at once (and wake waiting workers)."""
        ...

    def paused(self) -> set[str]:
        """The names of the paused queues."""
        ...

    def delete(self, job_id: str, now: float | None = None) -> bool:
        """Remove the job with its executions and steps, in any state. A running job's lease
        ends with it, so its late settlement, renewal or step write changes nothing; blocked
        jobs that run after it (unless it was done) are cancelled on record (DEP-01). False
        for an unknown id."""
        ...

    def beat(self, worker: WorkerBeat, now: float | None = None) -> None:
        """Record a worker process's heartbeat (keyed by host and pid), seen at `now`."""
        ...

    def workers(self, within: float = 15.0, now: float | None = None) -> list[WorkerBeat]:
        """Workers seen within `within` seconds, and those seen within 10 x `within` with
        `lost` True, by (host, pid); older entries are dropped."""
        ...

    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...


def settle_then_claim(
    store: Store,
    settlements: Sequence[Settlement],
    queues: Mapping[str, QueuePolicy],
    holder: Holder,
    limit: int,
    now: float | None = None,
) -> tuple[list[bool], list[Claimed]]:
    """`settle_and_claim` as two atomic steps, for stores that cannot share one transaction."""
    applied = store.settle(settlements, now) if settlements else []
    try:
        return applied, store.claim(queues, holder, limit, now) if limit > 0 else []
    except StoreError:
        return applied, []  # the settlements stand; the worker claims again on its next turn
