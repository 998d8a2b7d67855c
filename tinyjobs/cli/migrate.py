"""`tinyjobs migrate`: bring the store's schema up to date explicitly.

Stores migrate themselves on open; operators who prefer to run migrations as a deploy step
(with a role that may change the schema) run this instead."""

from __future__ import annotations

import click

from ..errors import ConfigError
from ..stores import open_store
from ..urls import mask, store_kind
from .common import handle_errors, resolve_url


@click.command()
@click.argument("url", required=False)
@click.pass_context
@handle_errors
def migrate(ctx: click.Context, url: str | None) -> None:
    """Create or upgrade the schema of the store at URL (default: --url / $TINYJOBS_URL).

    Exit status: 0 the schema is up to date, 2 no URL, or a store unreachable or refused."""
    target = resolve_url(ctx, url)
    if not target:
        raise click.UsageError("give the store URL as an argument, with --url or in $TINYJOBS_URL")
    kind = store_kind(target)
    if kind == "memory":
        raise ConfigError(f"{target}: an in-memory store lives in one process; there is nothing to migrate")
    store = open_store(target)  # opening applies every pending migration, under a lock
    store.close()
    if kind == "redis":
        click.echo(f"{mask(target)} is reachable; Redis keeps no schema, its keys are in the current layout")
    else:
        click.echo(f"schema of {mask(target)} is up to date")
