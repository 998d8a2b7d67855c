"""The settings of `tinyjobs verify` and the checks that refuse a run before anything runs
(exit 2): settings that make no sense, `memory://`, a store refused or unreachable, and a store
whose namespace already holds jobs.

The namespace: on PostgreSQL the schema (`?schema=`), on Redis the key prefix (`?prefix=`),
both set from `--prefix` (else the URL's own option, else `verify`); a SQLite file is its own
namespace. `--prefix` (default `verify`) also names verify's queue on every store."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..durations import parse_duration
from ..errors import ConfigError, TinyjobsError
from ..reaper import REAP_INTERVAL
from ..stores import open_store
from ..stores.base import DEFAULT_LEASE, Store
from ..urls import mask, split, store_kind, with_query

DEFAULT_PREFIX = "verify"
_NAMESPACE_OPTION = {"postgres": "schema", "redis": "prefix"}


class Refused(TinyjobsError):
    """verify will not run (exit 2): the message says why."""


@dataclass(frozen=True)
class Settings:
    """A verify run's settings, checked. `store_url` carries the namespace option."""

    url: str
    store_url: str
    namespace: str
    queue: str
    duration: float = 30.0
    rate: float = 50.0
    workers: int = 3
    slots: int = 8
    kill_every: float = 5.0
    lease: float = DEFAULT_LEASE
    settle: float = 2 * DEFAULT_LEASE
    keep: bool = False

    @property
    def total(self) -> int:
        """How many jobs the run sends."""
        return max(1, round(self.duration * self.rate))

    def describe(self) -> str:
        return (
            f"verify {mask(self.url)} ({self.namespace}, queue {self.queue}): {self.workers} "
            f"workers of {self.slots} slots, {self.rate:g} jobs/s for {self.duration:g} s, a kill "
            f"every {self.kill_every:g} s, lease {self.lease:g} s, settle within {self.settle:g} s"
        )


def _duration(value: Any, option: str) -> float:
    try:
        seconds = parse_duration(value, option)
    except ConfigError as err:
        raise Refused(str(err)) from None
    if seconds <= 0:
        raise Refused(f"{option} must be positive, got {value!r}")
    return seconds


def _positive(value: Any, option: str, kind: type) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise Refused(f"{option} must be a positive number, got {value!r}") from None
    if isinstance(value, bool) or number <= 0 or number != number or number == float("inf"):
        raise Refused(f"{option} must be a positive number, got {value!r}")
    return number


def default_settle(lease: float) -> float:
    """Twice the lease, and always more than the lease plus the reap interval."""
    return max(2 * lease, lease + REAP_INTERVAL + 1.0)


def namespaced(url: str, prefix: str | None) -> tuple[str, str, str]:
    """(the URL with its namespace option, a description of the namespace, the queue)."""
    try:
        kind = store_kind(url)
        query = split(url)[3]
    except ConfigError as err:
        raise Refused(str(err)) from None
    if kind == "memory":
        raise Refused(
            f"{mask(url)}: an in-memory store lives in one process, so verify's workers could not "
            "share it; give a SQLite file, PostgreSQL or Redis URL"
        )
    queue = prefix or DEFAULT_PREFIX
    option = _NAMESPACE_OPTION.get(kind)
    if option is None:
        return url, "the file itself", queue
    name = prefix or query.get(option) or DEFAULT_PREFIX
    return with_query(url, **{option: name}), f"{option} {name}", queue


def settings(
    url: str,
    *,
    duration: Any = "30s",
    rate: Any = 50,
    workers: Any = 3,
    slots: Any = 8,
    kill_every: Any = "5s",
    lease: Any = None,
    settle: Any = None,
    prefix: str | None = None,
    keep: bool = False,
) -> Settings:
    """Checked settings (Refused when they make no sense). Without `settle`, it is twice the
    lease; `settle` must exceed the lease plus the 1 s reap interval, since a job of a killed
    worker comes back when its lease ends."""
    d = _duration(duration, "--duration")
    k = _duration(kill_every, "--kill-every")
    lease_s = DEFAULT_LEASE if lease is None else _duration(lease, "--lease")
    if lease_s < 1:
        raise Refused(f"--lease must be at least 1 s, got {lease!r}")
    settle_s = default_settle(lease_s) if settle is None else _duration(settle, "--settle")
    if k >= d:
        raise Refused(
            f"--kill-every {kill_every} is not shorter than --duration {duration}: the run would kill no one"
        )
    if settle_s <= lease_s + REAP_INTERVAL:
        raise Refused(
            f"--settle {settle_s:g} s must exceed --lease {lease_s:g} s plus the {REAP_INTERVAL:g} s "
            "reap interval: a killed worker's job comes back only when its lease ends"
        )
    store_url, namespace, queue = namespaced(url, prefix)
    if prefix is not None and (not prefix or any(c.isspace() for c in prefix)):
        raise Refused(f"--prefix must be a non-empty name without spaces, got {prefix!r}")
    return Settings(
        url=url,
        store_url=store_url,
        namespace=namespace,
        queue=queue,
        duration=d,
        rate=_positive(rate, "--rate", float),
        workers=_positive(workers, "--workers", int),
        slots=_positive(slots, "--slots", int),
        kill_every=k,
        lease=lease_s,
        settle=settle_s,
        keep=keep,
    )


def open_checked(s: Settings) -> Store:
    """The store, opened; Refused when it is refused, unreachable, not shared between
    processes, or holds jobs in verify's namespace."""
    try:
        store = open_store(s.store_url)
    except TinyjobsError as err:
        raise Refused(mask(str(err))) from None
    except Exception as err:
        raise Refused(
            f"{mask(s.url)}: cannot open the store: {type(err).__name__}: {mask(str(err))}"
        ) from None
    try:
        if "shared" not in store.capabilities:
            raise Refused(f"{mask(s.url)}: this store cannot be shared between processes")
        held = sum(sum(states.values()) for states in store.counts().values())
    except Refused:
        store.close()
        raise
    except Exception as err:
        store.close()
        raise Refused(
            f"{mask(s.url)}: the store cannot be read: {type(err).__name__}: {mask(str(err))}"
        ) from None
    if held:
        store.close()
        raise Refused(
            f"{mask(s.url)} ({s.namespace}) holds {held:,} job{'' if held == 1 else 's'}: "
            "verify needs a store that holds no other jobs (use another --prefix, file or database)"
        )
    return store


def new_sqlite_file(s: Settings) -> str | None:
    """The path of the SQLite file that opening the store will create, or None (another store,
    or a file that exists): the report says what the run left behind."""
    if store_kind(s.store_url) != "sqlite":
        return None
    from ..stores.sqlite.connection import parse_url

    path = parse_url(s.store_url).path
    return None if os.path.exists(path) else path
