"""`tinyjobs check [URL] [--socket PATH] [--store-warnings] [--json]`.

Exit status: 0 nothing failed (WARN and NOT CHECKED print but pass), 1 a FAIL, 2 a bad URL, a
store that is unreachable or refused, or no supervisor answering on --socket. Every URL
printed is masked. With --socket and no URL (no --url, no $TINYJOBS_URL) only the supervisor
is checked: its store is named but not audited (its URL reaches us masked)."""

from __future__ import annotations

import json
from importlib import import_module

import click

from tinyjobs.app import DEFAULT_URL
from tinyjobs.check import Report, audit_url, health_findings, scrub, url_secrets
from tinyjobs.errors import ConfigError, StoreError, StoreUnavailable, TinyjobsError
from tinyjobs.findings import Finding, not_checked
from tinyjobs.urls import mask, store_kind

from .common import resolve_url as common_resolve_url


def resolve_url(ctx: click.Context, url: str | None) -> str:
    """The URL argument, else the global --url, else $TINYJOBS_URL (the CLI's one rule), else
    the default SQLite file: what a bare App would open."""
    return common_resolve_url(ctx, url) or DEFAULT_URL


def supervisor_health(path: str) -> dict:
    """The supervisor's health document from its socket; StoreUnavailable (exit 2) when
    nothing answers there or the answer is not a health document."""
    query = import_module("tinyjobs.supervisor.health").query
    try:
        return query(path)
    except (OSError, ValueError) as err:
        raise StoreUnavailable(f"no supervisor answers on {path}: {err}") from None


def _store_not_audited(health: dict) -> Finding:
    shown = health.get("url") or "its store"
    return not_checked(
        "store",
        f"only the supervisor was asked; it uses {shown}",
        "to audit that store too: tinyjobs check URL --socket PATH (or set $TINYJOBS_URL)",
    )


def _kind(url: str) -> str:
    try:
        return store_kind(url)
    except ConfigError:
        return "unknown"


def _fail(message: str, as_json: bool, code: int) -> None:
    if as_json:
        click.echo(json.dumps({"ok": False, "exit_code": code, "error": message}, indent=2))
    else:
        click.echo(f"tinyjobs: {message}", err=True)
    raise click.exceptions.Exit(code)


@click.command("check")
@click.argument("url", required=False)
@click.option("--socket", "socket_path", metavar="PATH", help="the supervisor's health socket")
@click.option(
    "--store-warnings",
    is_flag=True,
    help="show the store's FAIL findings as WARN (a development setup)",
)
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.pass_context
def check(
    ctx: click.Context,
    url: str | None,
    socket_path: str | None,
    store_warnings: bool,
    as_json: bool,
) -> None:
    """Audit the store's durability settings (and, with --socket, the supervisor's health).

    The store is URL, else --url, else $TINYJOBS_URL, else sqlite:///tinyjobs.db; with
    --socket and none of those, only the supervisor is checked.

    Exit status: 0 nothing failed (WARN and NOT CHECKED print but pass), 1 a FAIL, 2 a bad
    URL, a store unreachable or refused, or no supervisor answering on --socket."""
    given = common_resolve_url(ctx, url)
    url = given or DEFAULT_URL
    secrets = url_secrets(url)
    try:
        health = supervisor_health(socket_path) if socket_path else None
        if health is not None and not given:
            shown = str(health.get("url") or "")
            report = Report(url=shown or "the supervisor's store", store=_kind(shown))
            report.add([_store_not_audited(health)])
        else:
            report = audit_url(url, store_warnings=store_warnings)
        if health is not None:
            report.add(health_findings(health))
    except ConfigError as err:
        _fail(scrub(str(err), secrets), as_json, 2)
    except StoreError as err:
        _fail(scrub(str(err), secrets), as_json, 2)
    except TinyjobsError as err:
        _fail(f"{mask(url)}: {scrub(str(err), secrets)}", as_json, 2)
    click.echo(report.to_json() if as_json else report.render())
    ctx.exit(report.exit_code)
