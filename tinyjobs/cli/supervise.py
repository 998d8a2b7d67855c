"""`tinyjobs supervise`: the pre-fork supervisor, for systemd (see docs/operations.md).

Exit status: 0 stopped on request, 1 an unexpected failure, 2 bad options, 3 the app cannot be
loaded or a worker failed to boot (systemd's unit does not restart on 2 and 3)."""

from __future__ import annotations

import sys

import click

from .. import log
from ..urls import mask
from .common import resolve_url


@click.command()
@click.option("--app", "app_spec", required=True, metavar="MODULE:ATTR", help="The app whose tasks to run.")
@click.option(
    "--workers", type=click.IntRange(1, 1024), default=None, help="Worker processes [default: CPU count]."
)
@click.option(
    "--slots",
    type=click.IntRange(1, 10_000),
    default=8,
    show_default=True,
    help="Jobs at once in each worker.",
)
@click.option("--queues", help="Comma-separated queues (default: every queue the app knows).")
@click.option(
    "--socket", "socket_path", metavar="PATH", help="Health socket [default: $RUNTIME_DIRECTORY/health.sock]."
)
@click.option(
    "--drain-timeout", default="30s", show_default=True, help="How long SIGTERM waits for running jobs."
)
@click.option(
    "--max-jobs",
    type=click.IntRange(1),
    default=None,
    help="Recycle a worker after this many jobs (+ up to 10% jitter).",
)
@click.option(
    "--max-memory",
    default=None,
    metavar="SIZE",
    help="Recycle a worker past this RSS, e.g. 512MB (+ up to 10% jitter).",
)
@click.option(
    "--heartbeat-timeout",
    default="30s",
    show_default=True,
    help="Kill and replace a worker silent this long.",
)
@click.option(
    "--leader-ttl",
    default="10s",
    show_default=True,
    help="Leader lease; another supervisor takes over this long after a leader dies.",
)
@click.pass_context
def supervise(ctx: click.Context, app_spec: str, **options: object) -> None:
    """Run a pool of worker processes under one supervisor (SIGTERM drains, SIGHUP reloads).

    Exit status: 0 stopped on request, 1 an unexpected failure, 2 bad options, 3 the app
    cannot be loaded or a worker failed to boot (systemd's unit does not restart on 2 and 3)."""
    from tinyjobs.supervisor import Arbiter, SupervisorConfig
    from tinyjobs.supervisor.config import BootError

    log.configure()
    try:
        config = SupervisorConfig.from_options(app_spec, url=resolve_url(ctx), **options)  # type: ignore[arg-type]
    except BootError as err:
        click.echo(f"tinyjobs supervise: {mask(str(err))}", err=True)
        sys.exit(err.code)
    code = Arbiter(config).run()
    if code:
        click.echo(f"tinyjobs supervise: stopped with exit status {code} (see the log)", err=True)
    sys.exit(code)
