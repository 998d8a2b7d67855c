"""`tinyjobs worker`: one worker in the foreground, for development and simple deployments."""

from __future__ import annotations

import os
import signal
import sys

import click

from .. import log
from ..durations import parse_duration
from ..stop import StopReason
from ..storeguard import wait_until_reachable
from ..urls import mask, store_kind
from ..worker import Worker
from .common import command_app, handle_errors


@click.command()
@click.option("--app", "app_spec", required=True, metavar="MODULE:ATTR", help="The app whose tasks to run.")
@click.option("--slots", type=click.IntRange(1, 10_000), default=8, show_default=True, help="Jobs at once.")
@click.option("--queues", help="Comma-separated queues (default: every queue the app knows).")
@click.option(
    "--drain-timeout",
    default="30s",
    show_default=True,
    help="How long SIGTERM waits for running jobs.",
)
@click.pass_context
@handle_errors
def worker(ctx, app_spec, slots, queues, drain_timeout) -> None:
    """Run one worker in the foreground until SIGTERM or Ctrl-C (a second one stops at once).

    A sync handler past its timeout cannot be stopped, so the worker lets its other jobs
    finish and then replaces itself with a fresh process (same pid, exec).

    Exit status: 0 stopped on request, 2 bad options, an app that cannot be imported, or a
    store refused (memory:// included: nothing else could add its jobs), or a SQLite file that
    cannot be opened. A PostgreSQL or Redis server that does not answer is waited for."""
    log.configure(buffered=True)
    app = command_app(ctx, app_spec)
    if store_kind(app.url) in ("postgres", "redis"):
        # A server may come up after us (boot order, a restart): wait for it, with backoff,
        # saying so once. (A SQLite file that cannot be opened is a local mistake: exit 2.)
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # nothing in hand yet
        wait_until_reachable(lambda: app.store, log.get_logger())
    names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    unknown = [q for q in names or () if q not in app.known_queues()]
    if unknown:
        click.echo(
            f"tinyjobs: warning: no task of the app uses queue(s) {', '.join(unknown)} (its queues: "
            f"{', '.join(app.known_queues())}); only jobs enqueued there by name will run",
            err=True,
        )
    w = Worker(
        app,
        slots=slots,
        queues=names,
        drain_timeout=parse_duration(drain_timeout, "--drain-timeout"),
    )
    log.get_logger().info("worker.store", url=mask(app.url))
    reason = w.run()
    sys.stdout.flush()
    sys.stderr.flush()
    if reason == StopReason.RECYCLE:
        # The timed-out handler's thread cannot be stopped; exec ends it with the old image.
        os.execv(sys.executable, sys.orig_argv)
    os._exit(0)  # handler threads that ignored the drain must not hold the process open
