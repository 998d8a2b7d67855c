"""A registered task: its handler, its defaults, and `enqueue`."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from .errors import BadArguments, ConfigError
from .job import Job

if TYPE_CHECKING:
    from .run import Run

P = ParamSpec("P")
R = TypeVar("R", covariant=True)

# Keyword arguments of `enqueue` that are options, not the task's arguments.
ENQUEUE_OPTIONS = frozenset({"id", "key", "delay", "at", "after", "group", "priority", "conn", "queue"})


class Enqueuer(Protocol):
    """What a Task needs of its app: adding jobs by task name (`App` provides it)."""

    def enqueue(self, task: str, args: dict[str, Any] | None = None, **options: Any) -> Job: ...

    def enqueue_many(self, items: Sequence[tuple[str, dict[str, Any]]], **options: Any) -> list[Job]: ...

    async def aenqueue(self, task: str, args: dict[str, Any] | None = None, **options: Any) -> Job: ...

    async def aenqueue_many(
        self, items: Sequence[tuple[str, dict[str, Any]]], **options: Any
    ) -> list[Job]: ...


@dataclass
class Task(Generic[P, R]):
    """A function registered with `@app.task`. Call it directly to run it in-line (tests);
    `enqueue(**kwargs)` to run it in the background.

    Typed as `Task[P, R]`: P is the handler's parameters after the Run, R what it returns, so
    that `reply.enqueue(message_id=41)` is checked against `reply(run, message_id: int)`.
    PEP 612 allows no keyword-only parameter between `*args: P.args` and `**kwargs: P.kwargs`,
    so for type checkers the enqueue options are declared ahead of them; pass them by
    keyword (the task's own arguments are keywords too: a job's arguments are a JSON object)."""

    app: Enqueuer
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
        self._accepts = _keyword_parameters(self.fn)

    def argument_problems(self, args: dict[str, Any]) -> list[str]:
        """What keeps the handler from taking `args` as its keyword arguments (after the Run):
        each missing argument, and each one it has no parameter for (with the closest name it
        has). Empty when they fit, or when its signature cannot be read."""
        if self._accepts is None:
            return []
        names, required, open_ended = self._accepts
        missing = required.difference(args)
        extra = () if open_ended else [k for k in args if k not in names]
        problems = [f"missing argument {m!r}" for m in sorted(missing)]
        for key in extra:
            close = difflib.get_close_matches(key, sorted(names), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"unexpected argument {key!r}{hint}")
        return problems

    def describe_handler(self) -> str:
        """`task 'name': its handler fn(run, x)`, for messages about its arguments."""
        return f"task {self.name!r}: its handler {self.fn.__name__}{_signature_text(self.fn)}"

    def check_args(self, args: dict[str, Any]) -> None:
        """Raise BadArguments naming the argument when the handler cannot take `args` as its
        keyword arguments (after the Run): a missing one, or one it has no parameter for.

        Runs once per job of an enqueue: arguments that fit are told by two set comparisons
        of the dict's keys (every required name given, and no name the handler lacks unless
        it takes **kwargs); only arguments that do not fit are spelled out."""
        accepts = self._accepts
        if accepts is None:
            return
        if type(args) is dict:
            names, required, open_ended = accepts
            keys = args.keys()
            if keys >= required and (open_ended or keys <= names):
                return
        problems = self.argument_problems(args)
        if problems:
            raise BadArguments(
                f"{self.describe_handler()} cannot take these arguments: {'; '.join(problems)}; "
                "nothing was added"
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    if TYPE_CHECKING:  # the typed signatures (see the class docstring); the code is below

        def enqueue(
            self,
            id: str | None = None,
            key: str | None = None,
            delay: float | str | timedelta | None = None,
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
            delay: float | str | timedelta | None = None,
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
            if ENQUEUE_OPTIONS.isdisjoint(kwargs):  # the common call: arguments only
                return self.app.enqueue(self.name, kwargs)
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


def _keyword_parameters(fn: Callable[..., Any]) -> tuple[frozenset[str], frozenset[str], bool] | None:
    """(names the handler takes by keyword after the Run, those without a default, whether it
    takes **kwargs), or None when its signature cannot be read (nothing is checked then)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if params and params[0].kind == params[0].VAR_POSITIONAL:
        params = params[1:]
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    # A positional-only parameter after the Run can never be given (jobs pass keywords).
    variadic = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    required = {p.name for p in params if p.default is p.empty and p.kind not in variadic}
    open_ended = any(p.kind == p.VAR_KEYWORD for p in params)
    return frozenset(names), frozenset(required), open_ended


def _signature_text(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


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
