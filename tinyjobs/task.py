"""A registered task: its handler, its defaults, and `enqueue`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import ConfigError
from .job import Job

# Keyword arguments of `enqueue` that are options, not the task's arguments.
ENQUEUE_OPTIONS = frozenset({"id", "key", "delay", "at", "after", "group", "priority", "conn", "queue"})


class Enqueuer(Protocol):
    """What a Task needs of its app: adding jobs by task name (`App` provides it)."""

    def enqueue(self, task: str, args: dict[str, Any] | None = None, **options: Any) -> Job: ...

    def enqueue_many(self, items: Sequence[tuple[str, dict[str, Any]]], **options: Any) -> list[Job]: ...


@dataclass
class Task:
    """A function registered with `@app.task`. Call it directly to run it in-line (tests);
    `enqueue(**kwargs)` to run it in the background."""

    app: Enqueuer
    fn: Callable[..., Any]
    name: str
    queue: str
    attempts: int
    dedupe: float
    keep: float
    priority: int
    timeout: float | None

    def __post_init__(self) -> None:
        # Asked once per job on the worker's hot path: decide it once.
        self.is_async = inspect.iscoroutinefunction(self.fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def enqueue(self, **kwargs: Any) -> Job:
        """Add a job; option keywords (id, key, delay, at, after, group, priority, conn, queue)
        are split from the task's own arguments."""
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in ENQUEUE_OPTIONS}
        return self.app.enqueue(self.name, kwargs, **options)

    def enqueue_many(self, many: Iterable[dict[str, Any]], **options: Any) -> list[Job]:
        """Add one job per kwargs dict, with the same options, in one round trip."""
        return self.app.enqueue_many([(self.name, kwargs) for kwargs in many], **options)


def check_signature(fn: Callable[..., Any], name: str) -> None:
    """Refuse a handler that cannot take a Run first or uses an option name as a parameter."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if not positional:
        raise ConfigError(f"task {name!r}: the handler must take the Run as its first argument")
    clashes = sorted(p.name for p in params[1:] if p.name in ENQUEUE_OPTIONS)
    if clashes:
        raise ConfigError(
            f"task {name!r}: parameter(s) {', '.join(clashes)} clash with enqueue options; "
            "rename them (enqueue options: " + ", ".join(sorted(ENQUEUE_OPTIONS)) + ")"
        )


def after_ids(after: Any) -> tuple[str, ...]:
    """Job ids from `after=`: a Job, an id, or a list of either."""
    if after is None:
        return ()
    items: Sequence[Any] = after if isinstance(after, list | tuple) else [after]
    ids = []
    for item in items:
        job_id = getattr(item, "id", item)
        if not isinstance(job_id, str) or not job_id:
            raise ConfigError(f"after: {item!r} is neither a Job nor a job id")
        ids.append(job_id)
    return tuple(ids)
