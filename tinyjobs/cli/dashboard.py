"""`tinyjobs dashboard` (serve the web dashboard) and `tinyjobs metrics` (print the Prometheus
metrics once). The dashboard's web libraries are imported only when these commands run."""

from __future__ import annotations

import os
import sys

import click

from .common import EXIT_USAGE, command_app, handle_errors


@click.command()
@click.option("--app", "app_spec", metavar="MODULE:ATTR", help="The app: its queues' limits, cron schedules.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8181, show_default=True, help="0: any free port."
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing (every POST is refused).")
@click.option("--prefix", default="", metavar="/PATH", help="Serve under this path (behind a reverse proxy).")
@click.option("--no-auth", is_flag=True, help="Allow a non-loopback --host without authentication.")
@click.pass_context
@handle_errors
def dashboard(ctx, app_spec, host, port, read_only, prefix, no_auth) -> None:
    """Serve the web dashboard; the first line printed is its address.

    Basic authentication when $TINYJOBS_DASHBOARD_USER and $TINYJOBS_DASHBOARD_PASSWORD are set.
    A --host other than loopback needs them (or --no-auth, said explicitly). Stops cleanly on
    Ctrl-C or SIGTERM."""
    from ..dashboard.security import ENV_PASSWORD, ENV_USER
    from ..dashboard.serve import address, is_loopback

    user, password = os.environ.get(ENV_USER), os.environ.get(ENV_PASSWORD)
    if bool(user) != bool(password):
        _usage(f"set both ${ENV_USER} and ${ENV_PASSWORD} for basic authentication, or neither")
    auth = (user, password) if user and password else None
    if auth is None and not is_loopback(host) and not no_auth:
        _usage(
            f"refusing to serve the dashboard on {host} without authentication: anyone who can reach "
            f"it could read and change your jobs. Set ${ENV_USER} and ${ENV_PASSWORD}, put it behind "
            "your own login, or pass --no-auth to serve it open anyway"
        )
    prefix = prefix.rstrip("/")
    if prefix and not prefix.startswith("/"):
        _usage(f"--prefix must start with /, got {prefix!r}")
    try:
        from ..dashboard import make_app
        from ..dashboard.serve import serve
    except ModuleNotFoundError as err:
        _usage(
            f"the dashboard needs its optional extra: pip install 'tinyjobs[dashboard]' ({err.name} missing)"
        )
    app = command_app(ctx, app_spec, reading=True)  # memory:// refused; never creates a store
    wsgi_app = make_app(app, read_only=read_only, auth=auth, prefix=prefix)
    if auth is not None and not is_loopback(host):
        click.echo("tinyjobs: basic auth sends the password in clear: serve it behind TLS", err=True)

    def ready(bound: int) -> None:
        click.echo(address(host, bound, prefix))
        sys.stdout.flush()

    try:
        serve(wsgi_app, host, port, ready)
    except OSError as err:
        _usage(f"cannot listen on {host}:{port}: {err.strerror or err}")
    finally:
        app.close()


@click.command()
@click.option("--app", "app_spec", metavar="MODULE:ATTR", help="The app (its queues appear even when empty).")
@click.pass_context
@handle_errors
def metrics(ctx, app_spec) -> None:
    """Print the Prometheus metrics once, as /metrics serves them."""
    from ..dashboard.metrics import render

    app = command_app(ctx, app_spec, reading=True)
    try:
        click.echo(render(app.store, list(app.queues), now=app.clock.store_now()), nl=False)
    finally:
        app.close()


def _usage(message: str) -> None:
    click.echo(f"tinyjobs dashboard: {message}", err=True)
    sys.exit(EXIT_USAGE)
