"""Commands that add, read and steer jobs: enqueue, jobs, job, watch, cancel, retry."""

from __future__ import annotations

import json
import sys

import click

from ..durations import parse_duration
from ..job import STATES, Job
from .common import EXIT_FINDING, echo_json, handle_errors, load_app, resolve_url

app_option = click.option("--app", "app_spec", metavar="MODULE:ATTR", help="The app whose tasks to use.")


@click.command()
@click.argument("task")
@click.argument("args", required=False, default="{}")
@click.option("--delay", help="Run after this long (10, 10s, 5m, 1h, 7d).")
@click.option("--id", "job_id", help="The job's id; an id that exists adds nothing.")
@click.option("--key", help="Dedup key: refused while a job with this key is pending or running.")
@click.option("--queue", help="The queue (default: the task's, else 'default').")
@click.option("--priority", type=int, help="Higher runs first (default 0).")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@app_option
@click.pass_context
@handle_errors
def enqueue(ctx, task, args, delay, job_id, key, queue, priority, as_json, app_spec) -> None:
    """Add a job for TASK with keyword arguments ARGS (a JSON object).

    Without --app the job is written by name, for a worker that knows the task."""
    try:
        kwargs = json.loads(args)
    except json.JSONDecodeError as err:
        raise click.BadParameter(f"not JSON: {err}", param_hint="ARGS") from None
    if not isinstance(kwargs, dict):
        raise click.BadParameter("must be a JSON object of keyword arguments", param_hint="ARGS")
    app = load_app(app_spec, resolve_url(ctx))
    options = {"id": job_id, "key": key, "queue": queue}
    if delay is not None:
        options["delay"] = parse_duration(delay, "--delay")
    if priority is not None:
        options["priority"] = priority
    job = app.enqueue(task, kwargs, **{k: v for k, v in options.items() if v is not None})
    if as_json:
        echo_json({**job.to_dict(), "created": job.created})
    else:
        verb = "added" if job.created else "exists, nothing added:"
        click.echo(f"{verb} {job.id} ({job.task} on {job.queue}, {job.state})")


@click.command("jobs")
@click.option("--state", type=click.Choice(STATES), help="Only jobs in this state.")
@click.option("--queue", help="Only jobs of this queue.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@handle_errors
def list_jobs(ctx, state, queue, limit, as_json) -> None:
    """List jobs, oldest first."""
    app = load_app(None, resolve_url(ctx))
    found = app.jobs(state=state, queue=queue, limit=limit)
    if as_json:
        echo_json([job.to_dict() for job in found])
        return
    click.echo(f"{'ID':34} {'TASK':20} {'QUEUE':12} {'STATE':10} {'ATT':>5}  ERROR")
    for job in found:
        error = (job.error or "").strip().splitlines()[-1:] or [""]
        click.echo(
            f"{job.id[:34]:34} {job.task[:20]:20} {job.queue[:12]:12} {job.state:10} "
            f"{job.attempts:>2}/{job.max_attempts:<2}  {error[0][:60]}"
        )


@click.command("job")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@handle_errors
def show_job(ctx, job_id, as_json) -> None:
    """Show one job with its executions (exit 1 when there is no such job)."""
    job = load_app(None, resolve_url(ctx)).get(job_id)
    if job is None:
        click.echo(f"no job {job_id}", err=True)
        sys.exit(EXIT_FINDING)
    if as_json:
        echo_json(job.to_dict())
        return
    click.echo(render(job))


def render(job: Job) -> str:
    data = job.to_dict()
    lines = [
        f"{k:12} {json.dumps(data[k]) if k in ('args', 'result') else data[k]}"
        for k in (
            "id",
            "task",
            "queue",
            "state",
            "priority",
            "attempts",
            "max_attempts",
            "due",
            "created",
            "started",
            "finished",
            "key",
            "group",
            "ahead",
            "args",
            "result",
        )
        if data[k] not in (None, [], "")
    ]
    if job.error:
        lines.append("error:\n  " + job.error.strip().replace("\n", "\n  "))
    for e in data["executions"]:
        lines.append(
            f"execution {e['attempt']}: {e['host']} pid {e['pid']} {e['started']} -> "
            f"{e['ended'] or 'running'} {e['outcome'] or ''}"
        )
    return "\n".join(lines)


@click.command()
@click.argument("job_id")
@click.option("--timeout", help="Give up after this long (exit 1).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document per change.")
@click.pass_context
@handle_errors
def watch(ctx, job_id, timeout, as_json) -> None:
    """Print the job once per change until it is done, failed or cancelled."""
    app = load_app(None, resolve_url(ctx))
    last = None
    seconds = None if timeout is None else parse_duration(timeout, "--timeout")
    for job in app.watch(job_id, timeout=seconds):
        last = job
        if as_json:
            click.echo(json.dumps(job.to_dict(), default=str))
        else:
            extra = f" ahead {job.ahead}" if job.ahead is not None else ""
            click.echo(f"{job.id} {job.state} attempt {job.attempts}/{job.max_attempts}{extra}")
    if last is None:
        click.echo(f"no job {job_id}", err=True)
    if last is None or last.state != "done":
        sys.exit(EXIT_FINDING)


@click.command()
@click.argument("job_id")
@click.pass_context
@handle_errors
def cancel(ctx, job_id) -> None:
    """Cancel a job: a waiting one is removed, a running one finishes its attempt and stops."""
    if not load_app(None, resolve_url(ctx)).cancel(job_id):
        click.echo(f"nothing to cancel: no pending or running job {job_id}", err=True)
        sys.exit(EXIT_FINDING)
    click.echo(f"cancelled {job_id}")


@click.command()
@click.argument("job_id")
@click.pass_context
@handle_errors
def retry(ctx, job_id) -> None:
    """Run a failed or cancelled job again, with a fresh budget of attempts."""
    if not load_app(None, resolve_url(ctx)).retry(job_id):
        click.echo(f"cannot retry {job_id}: no failed or cancelled job with that id", err=True)
        sys.exit(EXIT_FINDING)
    click.echo(f"retrying {job_id}")
