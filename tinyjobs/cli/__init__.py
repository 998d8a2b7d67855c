"""The `tinyjobs` command line. The store URL comes from --url, else $TINYJOBS_URL, else the
app's. Exit status: 0 fine, 1 a finding or a failed promise, 2 bad usage or a store refused."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from .jobs import cancel, enqueue, list_jobs, retry, show_job, watch
from .worker import worker

# click >= 8.2 raises this for a group called without a command (the help is its message).
_NO_ARGS_IS_HELP: type[click.UsageError] = getattr(click.exceptions, "NoArgsIsHelpError", ())  # type: ignore[assignment]


class OneLineErrors(click.Group):
    """click's group, with its usage errors in the form of every other error: one line on
    stderr, `tinyjobs: <what is wrong> (see <command> --help)`, exit 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except _NO_ARGS_IS_HELP as err:  # `tinyjobs` alone: the help, as click shows it
            err.show()
            sys.exit(err.exit_code)
        except click.UsageError as err:
            where = err.ctx.command_path if err.ctx is not None else "tinyjobs"
            click.echo(f"tinyjobs: {err.format_message()} (see {where} --help)", err=True)
            sys.exit(err.exit_code)
        except click.ClickException as err:
            click.echo(f"tinyjobs: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("tinyjobs: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="TINYJOBS_URL",
    metavar="URL",
    help="Store URL: sqlite:///path.db, postgresql://..., redis://... ($TINYJOBS_URL).",
)
@click.option("--verbose", "-v", is_flag=True, help="Print the traceback behind an error.")
@click.version_option(package_name="tinyjobs")
@click.pass_context
def main(ctx: click.Context, url: str | None, verbose: bool) -> None:
    """tinyjobs: background jobs that are never lost once acknowledged.

    Exit status of every command: 0 fine, 1 a finding or a failed promise (each command's
    --help says which), 2 bad usage, or a store that is unreachable, refused or not there."""
    ctx.ensure_object(dict)
    ctx.obj["url"] = url
    ctx.obj["verbose"] = verbose


for command in (worker, enqueue, list_jobs, show_job, watch, cancel, retry):
    main.add_command(command)

# Commands that other parts of tinyjobs contribute, each in a module of its own.
for module_name, attr in (
    ("check", "check"),
    ("supervise", "supervise"),
    ("verify", "verify"),
    ("cron", "cron"),
    ("migrate", "migrate"),
):
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{module_name}":
            raise
        continue
    main.add_command(getattr(module, attr))
