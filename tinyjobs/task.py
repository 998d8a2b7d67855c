"""A registered task: its handler, its defaults, and `enqueue`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from .errors import ConfigError

if TYPE_CHECKING:
    from .app import App
    from .job import Job
    from .run import Run

P = ParamSpec("P")
R = TypeVar("R", covariant=True)

# Keyword arguments of `enqueue` that are options, not the task's arguments.
ENQUEUE_OPTIONS = frozenset({"id", "key", "delay", "at", "after", "group", "priority", "conn", "queue"})


@dataclass
class Task(Generic[P, R]):
    """A function registered with `@app.task`. Call it directly to run it in-line (tests);
    `enqueue(**kwargs)` to run it in the background.

    Typed as `Task[P, R]`: P is the handler's parameters after the Run, R what it returns, so
    that `reply.enqueue(message_id=41)` is checked against `reply(run, message_id: int)`.
    PEP 612 allows no keyword-only parameter between `*args: P.args` and `**kwargs: P.kwargs`,
    so for type checkers the enqueue options are declared ahead of them; pass them by
    keyword (the task's own arguments are keywords too: a job's arguments are a JSON object)."""

    app: App
    fn: Callable[Concatenate[Run, P], R]
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

    if TYPE_CHECKING:  # the typed signatures (see the class docstring); the code is below

        def enqueue(
            self,
            id: str | None = None,
            key: str | None = None,
            delay: float | str | None = None,
            at: datetime | None = None,
            after: Job | str | Sequence[Job | str] | None = None,
            group: str | None = None,
            priority: int | None = None,
            queue: str | None = None,
            conn: Any = None,
            *args: P.args,
            **kwargs: P.kwargs,
        ) -> Job: ...

        async def aenqueue(
            self,
            id: str | None = None,
            key: str | None = None,
            delay: float | str | None = None,
            at: datetime | None = None,
            after: Job | str | Sequence[Job | str] | None = None,
            group: str | None = None,
            priority: int | None = None,
            queue: str | None = None,
            conn: Any = None,
            *args: P.args,
            **kwargs: P.kwargs,
        ) -> Job: ...

    else:

        def enqueue(self, **kwargs: Any) -> Job:
            """Add a job; option keywords (id, key, delay, at, after, group, priority, conn,
            queue) are split from the task's own arguments."""
            options = {k: kwargs.pop(k) for k in list(kwargs) if k in ENQUEUE_OPTIONS}
            return self.app.enqueue(self.name, kwargs, **options)

        async def aenqueue(self, **kwargs: Any) -> Job:
            """`enqueue` for asyncio: the event loop never waits on the store (App.aenqueue)."""
            options = {k: kwargs.pop(k) for k in list(kwargs) if k in ENQUEUE_OPTIONS}
            return await self.app.aenqueue(self.name, kwargs, **options)

    def enqueue_many(self, many: Iterable[dict[str, Any]], **options: Any) -> list[Job]:
        """Add one job per kwargs dict, with the same options, in one round trip."""
        return self.app.enqueue_many([(self.name, kwargs) for kwargs in many], **options)

    async def aenqueue_many(self, many: Iterable[dict[str, Any]], **options: Any) -> list[Job]:
        """`enqueue_many` for asyncio (App.aenqueue_many)."""
        return await self.app.aenqueue_many([(self.name, kwargs) for kwargs in many], **options)


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
