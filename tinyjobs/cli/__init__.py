"""The `tinyjobs` command line. The store URL comes from --url, else $TINYJOBS_URL, else the
app's. Exit status: 0 fine, 1 a finding or a failed promise, 2 bad usage or a store refused."""

from __future__ import annotations

import importlib

import click

from .jobs import cancel, enqueue, list_jobs, retry, show_job, watch
from .worker import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="TINYJOBS_URL",
    metavar="URL",
    help="Store URL: sqlite:///path.db, postgresql://..., redis://... ($TINYJOBS_URL).",
)
@click.version_option(package_name="tinyjobs")
@click.pass_context
def main(ctx: click.Context, url: str | None) -> None:
    """tinyjobs: background jobs that are never lost once acknowledged."""
    ctx.ensure_object(dict)
    ctx.obj["url"] = url


for command in (worker, enqueue, list_jobs, show_job, watch, cancel, retry):
    main.add_command(command)

# Commands that other parts of tinyjobs contribute, each in a module of its own.
for module_name, attr in (
    ("check", "check"),
    ("supervise", "supervise"),
    ("verify", "verify"),
    ("cron", "cron"),
    ("migrate", "migrate"),
    ("queues", "pause"),
    ("queues", "resume"),
    ("queues", "delete"),
    ("dashboard", "dashboard"),
    ("dashboard", "metrics"),
):
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{module_name}":
            raise
        continue
    main.add_command(getattr(module, attr))
