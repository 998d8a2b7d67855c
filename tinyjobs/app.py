"""`App`: the registry of tasks and queues, and the front door to the store."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from .aio import AsyncCalls
from .clock import Clock, TimeSource, app_clock
from .durations import check_due, parse_duration, parse_rate
from .errors import ConfigError, DuplicateTask, UnknownTask
from .ids import new_id, new_ids
from .job import Job
from .serialization import DEFAULT_MAX_PAYLOAD, dump_args, dump_many
from .stores import open_store
from .stores.base import (
    DEFAULT_ATTEMPTS,
    DEFAULT_DEDUPE,
    DEFAULT_KEEP,
    DEFAULT_LEASE,
    DEFAULT_QUEUE,
    NewJob,
    QueuePolicy,
    Store,
    filled,
)
from .task import Task, after_ids, check_signature
from .urls import mask
from .watching import Watching

if TYPE_CHECKING:
    from .check import Report
    from .cron import Schedule
    from .run import Run

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_URL = "sqlite:///tinyjobs.db"
MAX_ID_LENGTH = 255
_NO_OPTIONS: dict[str, Any] = {}  # never written to


@dataclass(frozen=True)
class QueueConfig:
    """A queue's settings: its store policy (lease and limits) and its handlers' timeout."""

    policy: QueuePolicy
    timeout: float | None = None


class App(AsyncCalls):
    """Tasks, queues and the store they live in (the async calls: tinyjobs/aio.py).

    `App()` reads the URL from $TINYJOBS_URL, else uses `sqlite:///tinyjobs.db`. The store is
    opened on first use, so an app defined at import time opens nothing before a fork.

    `clock` is the app's one clock (tinyjobs.clock): by default real time as the store judges
    it; a `FakeClock` moves the store's time in tests. The worker, drain, cron and the
    supervisor's leader see the app through `tinyjobs.runtime.Runtime`."""

    def __init__(
        self,
        url: str | Store | None = None,
        *,
        clock: TimeSource | None = None,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
    ) -> None:
        if isinstance(url, str) or url is None:
            self.url = url or os.environ.get("TINYJOBS_URL") or DEFAULT_URL
            self._store: Store | None = None
        else:
            self.url = url.url
            self._store = url
        self.clock: Clock = app_clock(clock, lambda: self.store.now())
        self.max_payload = int(max_payload)
        self.tasks: dict[str, Task[Any, Any]] = {}
        self._plain: dict[str, NewJob] = {}  # task name -> its template without options
        self.queues: dict[str, QueueConfig] = {}
        self.crons: dict[str, Schedule] = {}

    def __repr__(self) -> str:
        return f"App({mask(self.url)!r}, tasks={sorted(self.tasks)})"

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.url)
        return self._store

    # -- registration -------------------------------------------------------------------

    def queue(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        rate: str | None = None,
        timeout: float | str | None = None,
        lease: float | str = DEFAULT_LEASE,
        group_concurrency: int | None = None,
        group_rate: str | None = None,
    ) -> QueueConfig:
        """Set a queue's limits, across all processes, and its handlers' timeout."""
        _check_name(name, "queue name")
        lease_s = parse_duration(lease, f"queue {name!r} lease")
        if lease_s < 1:
            raise ConfigError(f"queue {name!r}: lease must be at least 1 s, got {lease!r}")
        for label, value in (
            ("concurrency", concurrency),
            ("group_concurrency", group_concurrency),
        ):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"queue {name!r}: {label} must be a positive integer, got {value!r}")
        policy = QueuePolicy(
            name=name,
            lease=lease_s,
            concurrency=concurrency,
            rate=None if rate is None else parse_rate(rate, f"queue {name!r} rate"),
            group_concurrency=group_concurrency,
            group_rate=None if group_rate is None else parse_rate(group_rate, f"queue {name!r} group_rate"),
        )
        config = QueueConfig(
            policy, None if timeout is None else parse_duration(timeout, f"queue {name!r} timeout")
        )
        self.queues[name] = config
        return config

    @overload
    def task(self, fn: Callable[Concatenate[Run, P], R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str = DEFAULT_QUEUE,
        attempts: int = DEFAULT_ATTEMPTS,
        keep: float | str = DEFAULT_KEEP,
        dedupe: float | str = DEFAULT_DEDUPE,
        priority: int = 0,
        timeout: float | str | None = None,
    ) -> Callable[[Callable[Concatenate[Run, P], R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = DEFAULT_QUEUE,
        attempts: int = DEFAULT_ATTEMPTS,
        keep: float | str = DEFAULT_KEEP,
        dedupe: float | str = DEFAULT_DEDUPE,
        priority: int = 0,
        timeout: float | str | None = None,
    ) -> Task[Any, Any] | Callable[[Callable[..., Any]], Task[Any, Any]]:
        """Register a handler `fn(run, **kwargs)` (sync or async) as a task; usable bare
        (`@app.task`) or with options (`@app.task(queue="replies", attempts=5)`)."""

        def register(func: Callable[..., Any]) -> Task[Any, Any]:
            task_name = name or func.__name__
            _check_name(task_name, "task name")
            if task_name in self.tasks:
                raise DuplicateTask(f"a task named {task_name!r} is already registered in this app")
            if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
                raise ConfigError(
                    f"task {task_name!r}: attempts must be a positive integer, got {attempts!r}"
                )
            _check_name(queue, "queue name")
            check_signature(func, task_name)
            task = Task(
                app=self,
                fn=func,
                name=task_name,
                queue=queue,
                attempts=attempts,
                dedupe=parse_duration(dedupe, f"task {task_name!r} dedupe"),
                keep=parse_duration(keep, f"task {task_name!r} keep"),
                priority=_check_priority(priority),
                timeout=None if timeout is None else parse_duration(timeout, f"task {task_name!r} timeout"),
            )
            self.tasks[task_name] = task
            self._plain.clear()  # a task (re)registered: templates built before may be stale
            return task

        return register(fn) if fn is not None else register

    def cron(
        self,
        expr: str,
        tz: str = "UTC",
        queue: str = DEFAULT_QUEUE,
        catch_up: float | str | None = None,
        name: str | None = None,
    ) -> Callable[[Callable[..., Any]], Task[Any, Any]]:
        """Register a handler `fn(run)` as a task fired once per due time of the croniter
        expression `expr` (five fields, or six with seconds) in time zone `tz` (CRON-01); the
        task and schedule are named after the function unless `name=` says otherwise."""
        from .cron import Schedule, check_cron_handler, check_schedule

        def decorate(fn: Callable[..., Any]) -> Task[Any, Any]:
            schedule_name = name or fn.__name__
            if schedule_name in self.crons:
                raise DuplicateTask(
                    f"a cron schedule named {schedule_name!r} is already registered in this app"
                )
            window = check_schedule(schedule_name, expr, tz, catch_up)
            check_cron_handler(fn, schedule_name)
            task = self.task(name=schedule_name, queue=queue)(fn)
            self.crons[schedule_name] = Schedule(schedule_name, expr.strip(), tz, queue, window, task)
            return task

        return decorate

    def known_queues(self) -> list[str]:
        """Every queue a task or a queue setting names, and `default`."""
        return sorted({DEFAULT_QUEUE, *self.queues, *(t.queue for t in self.tasks.values())})

    def policies(self, queues: Iterable[str] | None = None) -> dict[str, QueuePolicy]:
        names = list(queues) if queues else self.known_queues()
        return {n: self.queues[n].policy if n in self.queues else QueuePolicy(n) for n in names}

    def timeout_for(self, task: Task[Any, Any]) -> float | None:
        """The task's timeout, else its queue's."""
        if task.timeout is not None:
            return task.timeout
        config = self.queues.get(task.queue)
        return config.timeout if config else None

    # -- enqueue --------------------------------------------------------------------------

    def enqueue(self, task: str, args: dict[str, Any] | None = None, **options: Any) -> Job:
        """Add a job for the task named `task` with keyword arguments `args`."""
        if options:
            return self.enqueue_many([(task, args or {})], **options)[0]
        # The common call (Task.enqueue without options): one job, none of a batch's work.
        return self.store.enqueue([self._plain_job(task, args or {})], self.clock.store_now())[0]

    def _plain_job(self, name: str, args: dict[str, Any]) -> NewJob:
        """`new_jobs([(name, args)], {})[0]`, spelled out for the one job of an enqueue without
        options (no batch lists, no zip, no batch encoder): the same checks in the same order,
        the same refusals, the same NewJob."""
        template = self._plain.get(name)
        if template is None:
            template = self._plain.setdefault(name, self._template(name, _NO_OPTIONS))
        task = self.tasks.get(name)
        if task is not None:
            task.check_args(args)
        return filled(template, new_id(), dump_args(args, self.max_payload))

    def enqueue_many(self, items: Sequence[tuple[str, dict[str, Any]]], **options: Any) -> list[Job]:
        """Add many jobs in one atomic round trip; return their Jobs in order. Options apply to
        each job. Nothing is written when any job is refused."""
        conn = options.pop("conn", None)
        new_jobs = self.new_jobs(items, options)
        return self.store.enqueue(new_jobs, self.clock.store_now(), conn=conn) if new_jobs else []

    def new_jobs(self, items: Sequence[tuple[str, dict[str, Any]]], options: dict[str, Any]) -> list[NewJob]:
        """The NewJobs of an enqueue (sync or async), options checked and arguments in JSON.
        Raises before returning anything when any job is refused (unknown task or option,
        arguments the handler cannot take or JSON cannot hold, a payload over max_payload).

        Runs once per enqueue call and its loop once per job: what a job's template holds
        (task, queue, options) is checked once per task name, not once per job; ids come
        from one draw of random bits for the batch (tinyjobs.ids)."""
        if not isinstance(items, list | tuple):
            items = list(items)  # any iterable, as before: the ids are drawn for its length
        job_id = None
        if options:
            unknown = set(options) - {"id", "key", "delay", "at", "after", "group", "priority", "queue"}
            if unknown:
                raise ConfigError(f"unknown enqueue option(s): {', '.join(sorted(unknown))}")
            job_id = options.get("id")
            if job_id is not None and len(items) > 1:
                raise ConfigError("id= names one job; give each job its own id with separate enqueues")
            bad_id = not isinstance(job_id, str) or not job_id or len(job_id) > MAX_ID_LENGTH
            if job_id is not None and bad_id:
                raise ConfigError(
                    f"id must be a non-empty string of at most {MAX_ID_LENGTH} characters, got {job_id!r}"
                )
        # Options are checked once per task, not once per job; without options, once per app.
        templates = self._plain if not options else {}
        tasks = self.tasks
        limit = self.max_payload
        ids = [job_id] * len(items) if job_id is not None else new_ids(len(items))
        # The batch's JSON in one encoder call when it can be (serialization.dump_many); else,
        # and for any job it refuses, each job's own (which names what is wrong), in order.
        batch = dump_many([args for _, args in items], limit) if len(items) > 1 else None
        payloads: Sequence[str | None] = [None] * len(items) if batch is None else batch
        new_jobs: list[NewJob] = []
        add = new_jobs.append
        for (name, args), one_id, payload in zip(items, ids, payloads, strict=True):
            template = templates.get(name) or templates.setdefault(name, self._template(name, options))
            task = tasks.get(name)
            if task is not None:
                task.check_args(args or {})
            add(filled(template, one_id, dump_args(args, limit) if payload is None else payload))
        return new_jobs

    def _template(self, name: str, options: dict[str, Any]) -> NewJob:
        """A NewJob for task `name` with the enqueue options applied (id and payload to fill)."""
        task = self.tasks.get(name)
        if task is None and self.tasks:
            raise UnknownTask(
                f"no task named {name!r} is registered in this app (known: {', '.join(sorted(self.tasks))})"
            )
        _check_name(name, "task name")
        queue = options.get("queue") or (task.queue if task else DEFAULT_QUEUE)
        _check_name(queue, "queue name")
        return NewJob(
            id="",
            task=name,
            queue=queue,
            priority=_check_priority(_given(options, "priority", task.priority if task else 0)),
            delay=_delay(options.get("delay")),
            at=_epoch(options.get("at")),
            key=_optional_text(options.get("key"), "key"),
            group=_optional_text(options.get("group"), "group"),
            after=after_ids(options.get("after")),
            max_attempts=task.attempts if task else DEFAULT_ATTEMPTS,
            dedupe=task.dedupe if task else DEFAULT_DEDUPE,
            keep=task.keep if task else DEFAULT_KEEP,
        )

    # -- reading and steering -------------------------------------------------------------

    def get(self, job_id: str, executions: bool = True) -> Job | None:
        """The job's snapshot with its executions, or None."""
        return self.store.get(job_id, self.clock.store_now(), executions=executions)

    def cancel(self, job_id: str) -> bool:
        """Cancel a job (JOB-08): True when there was something to cancel."""
        return self.store.cancel(job_id, self.clock.store_now())

    def retry(self, job_id: str) -> bool:
        """Run a failed or cancelled job again, with a fresh budget of attempts."""
        return self.store.retry(job_id, self.clock.store_now())

    def delete(self, job_id: str) -> bool:
        """Remove a job in any state with its executions and steps; jobs waiting on it are
        cancelled on record. False for an unknown id."""
        return self.store.delete(job_id, self.clock.store_now())

    def pause(self, queue: str) -> None:
        """Pause a queue (LIM-04): from now on no worker on any host claims its jobs; running
        ones finish. Stored, so it lasts until `resume`."""
        self.store.pause(queue)

    def resume(self, queue: str) -> None:
        """Make a paused queue's jobs claimable again at once."""
        self.store.resume(queue)

    def jobs(
        self,
        state: str | None = None,
        queue: str | None = None,
        limit: int = 100,
        *,
        newest: bool = False,
        offset: int = 0,
    ) -> list[Job]:
        """Jobs in `state` (every state when None), of `queue` (all when None), oldest first
        (newest first with `newest=True`), skipping `offset` of that order, at most `limit`."""
        return self.store.jobs(
            state=state, queue=queue, limit=limit, now=self.clock.store_now(), newest=newest, offset=offset
        )

    def watch(self, job_id: str, interval: float = 0.05, timeout: float | None = None) -> Iterator[Job]:
        """Yield the job's snapshot once per change, ending at a final state. A job that
        disappears while not final was cancelled while waiting: one last `cancelled` snapshot."""
        deadline = None if timeout is None else time.monotonic() + timeout
        watching = Watching()
        while deadline is None or time.monotonic() < deadline:
            seen = watching.see(self.store.get(job_id, self.clock.store_now()))
            if seen is not None:
                yield seen
            if watching.done:
                return
            time.sleep(interval)

    def drain(self, queues: Iterable[str] | None = None) -> int:
        """Run every due job now, in this thread, until none is due; return how many ran.
        For tests of your own tasks (memory:// and a FakeClock make it instant)."""
        from .drain import drain

        return drain(self, queues)

    def run_worker(
        self, slots: int = 8, queues: Sequence[str] | None = None, drain_timeout: float | str = 30.0
    ) -> str:
        """Run one worker in this process until SIGTERM/SIGINT; returns why it stopped."""
        from .worker import Worker

        worker = Worker(
            self,
            slots=slots,
            queues=queues,
            drain_timeout=parse_duration(drain_timeout, "drain_timeout"),
        )
        return worker.run()

    def check(self, store_warnings: bool = False) -> Report:
        """Audit the store's durability settings; a report with `.ok` and `.findings`.
        `store_warnings=True` turns the store's FAIL items into WARN (development setups)."""
        from .check import audit_url

        return audit_url(self.url, store_warnings=store_warnings)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def _given(options: dict[str, Any], name: str, default: Any) -> Any:
    """The option's value, or `default` when it is absent or None (the typed signatures of
    Task.enqueue declare None as "not given")."""
    value = options.get(name)
    return default if value is None else value


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not name or len(name) > 200 or any(c.isspace() for c in name):
        raise ConfigError(
            f"{what} must be a non-empty string without spaces (at most 200 characters), got {name!r}"
        )


def _check_priority(priority: Any) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ConfigError(f"priority must be an integer, got {priority!r}")
    return priority


def _optional_text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _delay(delay: Any) -> float:
    """Seconds from `delay=` (a number, a string with a unit or a timedelta), refused when it
    would put the job past the latest time tinyjobs holds."""
    if not delay:
        return 0.0
    seconds = parse_duration(delay, "delay")
    check_due(time.time() + seconds, delay, "delay")
    return seconds


def _epoch(at: Any) -> float | None:
    if at is None:
        return None
    if not isinstance(at, datetime):
        raise ConfigError(f"at must be an aware datetime, got {type(at).__name__}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise ConfigError(f"at must be an aware datetime (with a time zone), got naive {at.isoformat()}")
    return check_due(at.timestamp(), at.isoformat(), "at")
