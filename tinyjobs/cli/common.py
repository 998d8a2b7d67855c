"""What the CLI commands share: the store URL, loading `--app`, JSON output, exit codes."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ..app import DEFAULT_URL, App
from ..errors import ConfigError, StoreError, TinyjobsError
from ..urls import mask

EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


def resolve_url(ctx: click.Context, explicit: str | None = None) -> str | None:
    """The store URL: an explicit argument, else --url, else $TINYJOBS_URL (None: the app's)."""
    obj = ctx.find_root().obj or {}
    return explicit or obj.get("url") or os.environ.get("TINYJOBS_URL") or None


def load_app(spec: str | None, url: str | None) -> App:
    """The App named by `module:attr` (the current directory importable), or a bare App on
    `url` when no --app is given. A URL given on the command line overrides the app's."""
    if not spec:
        return App(url or DEFAULT_URL)
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise click.UsageError(f"--app {spec!r}: expected MODULE:ATTR, such as myproject.jobs:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise click.UsageError(f"--app {spec!r}: cannot import {module_name!r}: {err}") from None
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise click.UsageError(f"--app {spec!r}: {module_name}.{attr} is not a tinyjobs.App")
    if url:
        app.url = url
        app._store = None  # reopen on the URL given here
    return app


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn tinyjobs errors into a one-line message and exit status 2, with passwords masked."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, StoreError, TinyjobsError) as err:
            click.echo(f"tinyjobs: {mask(str(err))}", err=True)
            sys.exit(EXIT_USAGE)

    return wrapper


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))
