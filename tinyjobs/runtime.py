"""`Runtime`: what the components that run jobs (the worker, `app.drain()`, the supervisor's
leader) use of an App. `App` provides it; they never see the rest (enqueue, registration).

A leaf: it names the types the components exchange and imports none of the components."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from .clock import Clock
from .stores.base import QueuePolicy, Store
from .task import Task

if TYPE_CHECKING:
    # For the type only: tinyjobs.cron loads croniter, which an app without schedules never needs.
    from .cron import Schedule


class Runtime(Protocol):
    """The store and its one clock, the tasks and cron schedules, and the queues' settings."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def tasks(self) -> Mapping[str, Task]: ...

    @property
    def crons(self) -> Mapping[str, Schedule]: ...

    def known_queues(self) -> list[str]:
        """Every queue a task or a queue setting names, and `default`."""
        ...

    def policies(self, queues: Iterable[str] | None = None) -> dict[str, QueuePolicy]:
        """The store policy (lease and limits) of each queue, of every known one by default."""
        ...

    def timeout_for(self, task: Task) -> float | None:
        """The task's timeout, else its queue's; None when neither has one."""
        ...
