"""Commands that steer queues and remove jobs: pause, resume, delete."""

from __future__ import annotations

import sys

import click

from .common import EXIT_FINDING, handle_errors, load_app, resolve_url


@click.command()
@click.argument("queue")
@click.pass_context
@handle_errors
def pause(ctx, queue) -> None:
    """Pause QUEUE: from now on no worker on any host takes its jobs; running ones finish.

    The pause is stored and lasts, across restarts, until `tinyjobs resume QUEUE`."""
    app = load_app(None, resolve_url(ctx))
    was = queue in app.store.paused()
    app.pause(queue)
    click.echo(f"queue {queue} {'was already' if was else 'is now'} paused")


@click.command()
@click.argument("queue")
@click.pass_context
@handle_errors
def resume(ctx, queue) -> None:
    """Resume QUEUE: its waiting jobs can be taken again at once."""
    app = load_app(None, resolve_url(ctx))
    was = queue in app.store.paused()
    app.resume(queue)
    click.echo(f"queue {queue} {'resumed' if was else 'was not paused'}")


@click.command()
@click.argument("job_id")
@click.pass_context
@handle_errors
def delete(ctx, job_id) -> None:
    """Delete a job in any state, with its executions and steps.

    Jobs waiting on it are cancelled, with the reason on record. A running job's handler is
    not stopped: its lease ends, so whatever it settles later changes nothing."""
    if not load_app(None, resolve_url(ctx)).delete(job_id):
        click.echo(f"nothing to delete: no job {job_id}", err=True)
        sys.exit(EXIT_FINDING)
    click.echo(f"deleted {job_id}")
