"""The `tinyjobs` command line. The store URL comes from --url, else $TINYJOBS_URL, else the
app's. Exit status: 0 fine, 1 a finding or a failed promise, 2 bad usage or a store refused."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

# Each command's module, imported only when that command runs (or --help lists them all): a
# command pays for its own imports alone, so `supervise` and `worker` start sooner. A module
# that is not there (a part of tinyjobs left out of this install) has no command.
COMMANDS = {
    "worker": ("worker", "worker"),
    "enqueue": ("jobs", "enqueue"),
    "jobs": ("jobs", "list_jobs"),
    "job": ("jobs", "show_job"),
    "watch": ("jobs", "watch"),
    "cancel": ("jobs", "cancel"),
    "retry": ("jobs", "retry"),
    "check": ("check", "check"),
    "supervise": ("supervise", "supervise"),
    "verify": ("verify", "verify"),
    "cron": ("cron", "cron"),
    "migrate": ("migrate", "migrate"),
    "pause": ("queues", "pause"),
    "resume": ("queues", "resume"),
    "delete": ("queues", "delete"),
    "dashboard": ("dashboard", "dashboard"),
    "metrics": ("dashboard", "metrics"),
}

# click >= 8.2 raises this for a group called without a command (the help is its message); with
# an older click the tuple is empty and its `except` clause catches nothing.
_no_args_is_help = getattr(click.exceptions, "NoArgsIsHelpError", None)
_NO_ARGS_IS_HELP: tuple[type[click.UsageError], ...] = (_no_args_is_help,) if _no_args_is_help else ()


class OneLineErrors(click.Group):
    """click's group, with its usage errors in the form of every other error: one line on
    stderr, `tinyjobs: <what is wrong> (see <command> --help)`, exit 2; its commands (COMMANDS)
    imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, (module, _) in COMMANDS.items() if _module_exists(module))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not _module_exists(COMMANDS[cmd_name][0]):
            return None
        module_name, attr = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(f"{__name__}.{module_name}"), attr)
        return command

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


def _module_exists(name: str) -> bool:
    return importlib.util.find_spec(f"{__name__}.{name}") is not None
