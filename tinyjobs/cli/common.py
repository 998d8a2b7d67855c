"""What the CLI commands share: the store URL, loading `--app`, JSON output, exit codes.

Every error a command prints is one line, `tinyjobs: <what is wrong>`, with passwords masked;
the traceback behind it only with `tinyjobs --verbose`."""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ..app import DEFAULT_URL, App
from ..errors import ConfigError, StoreError, TinyjobsError
from ..serialization import a
from ..urls import mask, store_kind

EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


class NoStoreThere(StoreError):
    """A read command was pointed at a SQLite file that does not exist (nothing to read)."""


def resolve_url(ctx: click.Context, explicit: str | None = None) -> str | None:
    """The store URL: an explicit argument, else --url, else $TINYJOBS_URL (None: the app's)."""
    obj = ctx.find_root().obj or {}
    return explicit or obj.get("url") or os.environ.get("TINYJOBS_URL") or None


def verbose(ctx: click.Context | None = None) -> bool:
    """Whether `tinyjobs --verbose` was given (tracebacks behind one-line errors)."""
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx and (ctx.find_root().obj or {}).get("verbose"))


def load_app(spec: str | None, url: str | None) -> App:
    """The App named by `module:attr` (the current directory importable), or a bare App on
    `url` when no --app is given. A URL given on the command line overrides the app's.

    A module that cannot be imported (whatever it raises) is a UsageError naming the cause in
    one line (exit 2); the traceback is printed first only with --verbose."""
    if not spec:
        return App(url or DEFAULT_URL)
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise click.UsageError(f"--app {spec!r}: expected MODULE:ATTR, such as myproject.jobs:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module may raise anything while it is imported
        if verbose():
            traceback.print_exc()
        where = _raise_site(err)
        raise click.UsageError(
            f"--app {spec!r}: cannot import {module_name!r}: {type(err).__name__}: {mask(str(err))}"
            + (f" ({where})" if where else "")
            + ("" if verbose() else "; tinyjobs --verbose shows the traceback")
        ) from None
    if not hasattr(module, attr):
        raise click.UsageError(f"--app {spec!r}: module {module_name!r} has no attribute {attr!r}")
    app = getattr(module, attr)
    if not isinstance(app, App):
        raise click.UsageError(
            f"--app {spec!r}: {module_name}.{attr} is {a(type(app).__name__)}, not a tinyjobs.App"
        )
    if url:
        app.url = url
        app._store = None  # reopen on the URL given here
    return app


def _raise_site(err: BaseException) -> str:
    """`file:line` of the innermost frame that raised `err`, or ''."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"{last.filename}:{last.lineno}"


def command_app(ctx: click.Context, spec: str | None, *, reading: bool = False) -> App:
    """The app a one-shot command works with: --app's (its store unless --url / $TINYJOBS_URL
    says otherwise), else a bare App on the URL. memory:// is refused (a one-shot process's
    memory is gone when it exits). A reading command never creates a SQLite file: when the
    file is not there it raises NoStoreThere naming the URL it looked at."""
    app = load_app(spec, resolve_url(ctx))
    kind = store_kind(app.url)
    if kind == "memory":
        raise ConfigError(
            f"{app.url}: an in-memory store lives in one process, and this command's process "
            "ends when it is done (a job added there would vanish, a list would always be "
            "empty); use sqlite:///path.db, postgresql://... or redis://..."
        )
    if reading and kind == "postgres":
        from ..stores.postgres.probe import has_store

        if not has_store(app.url):
            from ..stores.postgres.config import parse

            raise NoStoreThere(
                f"nothing at {mask(app.url)} ({_url_source(ctx, spec)}): the schema "
                f"{parse(app.url).schema!r} holds no tinyjobs store, so no job was ever added "
                f"there (tinyjobs migrate {mask(app.url)} creates it empty)"
            )
    if reading and kind == "sqlite":
        from ..stores.sqlite.connection import parse_url

        path = parse_url(app.url).path
        if not os.path.exists(path):
            if spec and not resolve_url(ctx):
                raise NoStoreThere(
                    f"nothing at {mask(app.url)} (the URL of --app {spec}): the file {path} does "
                    f"not exist yet, so no job was ever added there (tinyjobs migrate "
                    f"{mask(app.url)} creates it empty)"
                )
            raise NoStoreThere(
                f"nothing at {mask(app.url)} ({_url_source(ctx, spec)}): the file {path} does not "
                "exist; give the store with --url URL, $TINYJOBS_URL or --app MODULE:ATTR"
            )
    return app


def _url_source(ctx: click.Context, spec: str | None = None) -> str:
    if (ctx.find_root().obj or {}).get("url"):
        return "from --url"
    if os.environ.get("TINYJOBS_URL"):
        return "from $TINYJOBS_URL"
    if spec:
        return f"the URL of --app {spec}"
    return "the default: no --url, $TINYJOBS_URL or --app given"


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn tinyjobs errors into a one-line message and exit status 2, with passwords masked
    (the traceback first with --verbose)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, StoreError, TinyjobsError) as err:
            if verbose():
                traceback.print_exc()
            click.echo(f"tinyjobs: {mask(str(err))}", err=True)
            sys.exit(EXIT_USAGE)

    return wrapper


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))
