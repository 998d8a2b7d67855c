"""Cron schedules (CRON-01): `@app.cron(expr, tz=..., queue=..., catch_up=...)`, fired once per
due time through the store's unique (schedule, due time) record.

croniter is imported here and nowhere else. A schedule's due times are computed by croniter in
the schedule's time zone (zoneinfo), so DST follows croniter's rules: a time that does not exist
on a spring-forward day fires at the next time that does, and each due time is one instant.

Which due times a tick fires, for a schedule whose last recorded due time is `last`:
- `last` known, no `catch_up`: the latest due time <= now, when it is later than `last` (after
  an outage only the latest missed time fires, once).
- `last` known, `catch_up="1h"`: every due time later than `last` inside (now - 1h, now], oldest
  first, and in any case the latest due time <= now (catch-up never fires less than no catch-up).
- `last` unknown (the schedule never fired on this store): nothing from the past, except the
  latest due time when it lies within FIRST_RUN_GRACE of now or after this scheduler first saw
  the schedule. So a new schedule's first due time fires as long as some scheduler ticks at
  least once per FIRST_RUN_GRACE; its first tick after a long-stopped deploy fires nothing stale.

Never twice: `store.fire_cron` records the due time and enqueues the job in one atomic step and
refuses any due time not later than the record, whatever number of processes tick. Never zero:
the due times are computed from the recorded last due time, not from the previous tick.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .clock import Clock
from .durations import parse_duration
from .errors import ConfigError
from .stores.base import NewJob, Store
from .task import Task

FIRST_RUN_GRACE = 60.0  # a never-fired schedule fires a due time at most this old
MAX_WAIT = 1.0  # poll() ticks at least this often, whatever the next due time
MAX_FIRES_PER_TICK = 1000  # a long catch-up continues on the next tick


@dataclass(frozen=True)
class Schedule:
    """One cron schedule: its name (also its task's name), a croniter expression (five fields,
    or six with seconds last), a time zone, the queue its jobs go to, the catch-up window in
    seconds (None: only the latest missed time) and the task it enqueues."""

    name: str
    expression: str
    tz: str
    queue: str
    catch_up: float | None
    task: Task

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def latest(self, now: float) -> float:
        """The latest due time <= now."""
        it = croniter(self.expression, _aware(now + 1.0, self.zone))
        due = it.get_prev(datetime).timestamp()
        while due > now:
            due = it.get_prev(datetime).timestamp()
        return due

    def after(self, start: float, until: float, limit: int = MAX_FIRES_PER_TICK) -> list[float]:
        """Due times later than `start` and <= `until`, oldest first, at most `limit`."""
        it = croniter(self.expression, _aware(start, self.zone))
        dues: list[float] = []
        while len(dues) < limit:
            due = it.get_next(datetime).timestamp()
            if due > until:
                break
            if due > start:
                dues.append(due)
        return dues

    def next_after(self, now: float) -> float:
        """The first due time later than `now`."""
        return self.after(now, float("inf"), 1)[0]

    def job(self, due: float) -> NewJob:
        """The job fired for `due`: id `cron:<name>:<due>`, due at `due` (so `run.due` is it)."""
        task = self.task
        return NewJob(
            id=f"cron:{self.name}:{int(due)}",
            task=task.name,
            queue=self.queue,
            priority=task.priority,
            at=due,
            max_attempts=task.attempts,
            dedupe=task.dedupe,
            keep=task.keep,
        )


def check_schedule(name: str, expression: Any, tz: Any, catch_up: Any) -> float | None:
    """Refuse an expression or time zone that croniter or zoneinfo cannot use (ConfigError
    naming it); return the catch-up window in seconds."""
    if not isinstance(expression, str) or len(expression.split()) not in (5, 6):
        raise ConfigError(
            f"cron {name!r}: expression {expression!r} must have five fields, or six with seconds last"
        )
    if not croniter.is_valid(expression):
        raise ConfigError(f"cron {name!r}: {expression!r} is not a valid cron expression")
    try:
        if not isinstance(tz, str):
            raise ZoneInfoNotFoundError(tz)
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"cron {name!r}: unknown time zone {tz!r} (use an IANA name such as 'Europe/Berlin')"
        ) from None
    if catch_up is None:
        return None
    window = parse_duration(catch_up, f"cron {name!r} catch_up")
    return window or None


class CronSource(Protocol):
    """What a scheduler uses of an App: its schedules, its store and its one clock."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def crons(self) -> Mapping[str, Schedule]: ...


def check_cron_handler(fn: Callable[..., Any], name: str) -> None:
    """Refuse, at decoration, a handler that the cron call `fn(run)` cannot call."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C function: nothing to read, the first run will tell
    try:
        signature.bind(object())
    except TypeError as err:
        raise ConfigError(
            f"cron schedule {name!r}: a cron job calls {fn.__name__}(run) with no other "
            f"arguments, but the handler is {fn.__name__}{signature} ({err}); give its other "
            "parameters defaults"
        ) from None


class CronScheduler:
    """Fires the app's schedules when due. Any number of schedulers may tick the same store at
    once (each worker, the supervisor's leader): the store lets one fire each due time."""

    def __init__(self, app: CronSource, log: Any) -> None:
        self.app, self.log = app, log
        self._first_seen: dict[str, float] = {}
        self._poll_at = 0.0

    def tick(self, now: float | None = None) -> float:
        """Fire every due time that is due; return seconds until the next due time. Never
        raises: a failing schedule is logged and tried again on the next tick."""
        if now is None:
            now = self.app.clock.now()
        wait = float("inf")
        for schedule in list(self.app.crons.values()):
            try:
                self._fire_due(schedule, now)
                wait = min(wait, schedule.next_after(now) - now)
            except Exception as err:
                self.log.error("cron.error", schedule=schedule.name, error=str(err))
                wait = min(wait, MAX_WAIT)
        return max(0.0, wait)

    def poll(self) -> float:
        """Tick when the next due time may have come (at least every MAX_WAIT seconds);
        cheap between. For a loop that runs often, such as the worker's."""
        mono = time.monotonic()
        if mono >= self._poll_at:
            self._poll_at = mono + min(MAX_WAIT, self.tick())
        return max(0.0, self._poll_at - mono)

    def due_times(self, schedule: Schedule, now: float, last: float | None) -> list[float]:
        """The due times to fire now, oldest first (the rules in this module's docstring)."""
        latest = schedule.latest(now)
        if last is None:
            seen = self._first_seen.setdefault(schedule.name, now)
            return [latest] if latest >= min(seen, now - FIRST_RUN_GRACE) else []
        if latest <= last:
            return []
        if schedule.catch_up is None:
            return [latest]
        dues = schedule.after(max(last, now - schedule.catch_up), now)
        if not dues or dues[-1] < latest and len(dues) < MAX_FIRES_PER_TICK:
            dues.append(latest)
        return dues

    def _fire_due(self, schedule: Schedule, now: float) -> None:
        store = self.app.store
        for due in self.due_times(schedule, now, store.cron_last(schedule.name)):
            job = schedule.job(due)
            if store.fire_cron(schedule.name, due, job, now):
                self.log.info(
                    "cron.fired",
                    schedule=schedule.name,
                    due=_iso(due, schedule.zone),
                    job_id=job.id,
                    queue=schedule.queue,
                )


def _aware(ts: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(ts, UTC).astimezone(zone)


def _iso(ts: float | None, zone: ZoneInfo) -> str | None:
    return None if ts is None else _aware(ts, zone).isoformat()


def describe(app: CronSource, now: float | None = None) -> list[dict[str, Any]]:
    """Each schedule with its expression, time zone, queue, last fired and next due time (for
    `tinyjobs cron`)."""
    if now is None:
        now = app.clock.now()
    rows = []
    for schedule in app.crons.values():
        last = app.store.cron_last(schedule.name)
        rows.append(
            {
                "name": schedule.name,
                "expression": schedule.expression,
                "tz": schedule.tz,
                "queue": schedule.queue,
                "catch_up": schedule.catch_up,
                "last": _iso(last, schedule.zone),
                "next": _iso(schedule.next_after(now), schedule.zone),
            }
        )
    return rows
