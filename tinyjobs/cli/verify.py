"""`tinyjobs verify URL [--duration] [--rate] [--workers] [--slots] [--kill-every] [--lease]
[--settle] [--prefix] [--keep]`: a chaos run against the store that reports what was lost.

Exit status: 0 every promise held, 1 one did not (the report says which), 2 before anything
runs: a store refused or unreachable, memory://, a store holding other jobs, or settings that
make no sense. Every URL printed is masked."""

from __future__ import annotations

import click

from ..urls import mask
from ..verify import Refused, run_cli, settings
from .common import EXIT_USAGE, resolve_url


@click.command("verify")
@click.argument("url", required=False)
@click.option("--duration", default="30s", show_default=True, help="How long to send jobs.")
@click.option("--rate", default="50", show_default=True, help="Jobs sent a second.")
@click.option("--workers", default="3", show_default=True, help="Worker processes.")
@click.option("--slots", default="8", show_default=True, help="Jobs at once in each worker.")
@click.option(
    "--kill-every",
    default="5s",
    show_default=True,
    help="Stop a worker this often, SIGTERM and SIGKILL in turn, and start another.",
)
@click.option("--lease", default=None, help="The lease of verify's queue  [default: 30s].")
@click.option(
    "--settle",
    default=None,
    help="How long to wait for the store to settle; must exceed the lease plus the "
    "1 s reap interval  [default: twice the lease].",
)
@click.option(
    "--prefix",
    default=None,
    help="The namespace in the store: PostgreSQL schema, Redis key prefix, and the "
    "queue's name  [default: the URL's own, else verify].",
)
@click.option("--keep", is_flag=True, help="Leave the finished jobs in the store instead of purging.")
@click.pass_context
def verify(
    ctx: click.Context,
    url: str | None,
    duration: str,
    rate: str,
    workers: str,
    slots: str,
    kill_every: str,
    lease: str | None,
    settle: str | None,
    prefix: str | None,
    keep: bool,
) -> None:
    """Prove on URL's store that no acknowledged job is lost while workers are killed.

    Exit status: 0 every promise held, 1 one did not (the report says which), 2 before
    anything runs: a store refused or unreachable, memory://, a store holding other jobs, or
    settings that make no sense."""
    url = resolve_url(ctx, url)
    if not url:
        raise click.UsageError("give the store URL: tinyjobs verify URL")
    try:
        s = settings(
            url,
            duration=duration,
            rate=rate,
            workers=workers,
            slots=slots,
            kill_every=kill_every,
            lease=lease,
            settle=settle,
            prefix=prefix,
            keep=keep,
        )
        code = run_cli(s, click.echo)
    except Refused as err:
        click.echo(f"tinyjobs verify: {mask(str(err))}", err=True)
        ctx.exit(EXIT_USAGE)
    ctx.exit(code)
