"""`tinyjobs cron`: each schedule of the app with its last fired and next due time."""

from __future__ import annotations

import click

from .common import echo_json, handle_errors, load_app, resolve_url


@click.command()
@click.option(
    "--app", "app_spec", required=True, metavar="MODULE:ATTR", help="The app whose schedules to list."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document, for machines.")
@click.pass_context
@handle_errors
def cron(ctx: click.Context, app_spec: str, as_json: bool) -> None:
    """List each cron schedule: expression, time zone, queue, the last due time fired (as the
    store records it) and the next due time, both in the schedule's time zone.

    Exit status: 0 listed, 2 an app that cannot be imported or a store unreachable or
    refused."""
    from ..cron import describe

    app = load_app(app_spec, resolve_url(ctx))
    try:
        rows = describe(app)
    finally:
        app.close()
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no cron schedules in this app")
        return
    headers = ("NAME", "EXPRESSION", "TZ", "QUEUE", "LAST", "NEXT")
    table = [headers] + [
        (r["name"], r["expression"], r["tz"], r["queue"], r["last"] or "never", r["next"]) for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(headers))]
    for row in table:
        click.echo(
            "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
