"""Commands that add, read and steer jobs: enqueue, jobs, job, watch, cancel, retry.

Each takes `--app MODULE:ATTR` to use that app's store (and, for enqueue, its tasks); `--url`
or $TINYJOBS_URL overrides the store. The reading commands never create a store file."""

from __future__ import annotations

import json
import sys

import click

from ..durations import parse_duration
from ..job import RUNNING, STATES, Job
from ..stores.base import DEFAULT_ATTEMPTS
from .common import EXIT_FINDING, command_app, echo_json, handle_errors

app_option = click.option(
    "--app",
    "app_spec",
    metavar="MODULE:ATTR",
    help="The app whose store (and tasks) to use; --url / $TINYJOBS_URL override its store.",
)


@click.command()
@click.argument("task")
@click.argument("args", required=False, default="{}")
@click.option("--delay", help="Run after this long (10, 10s, 5m, 1h, 7d).")
@click.option("--id", "job_id", help="The job's id; an id that exists adds nothing.")
@click.option(
    "--key",
    help="Dedup key: refused while a job with this key (of any task) is pending or running.",
)
@click.option("--queue", help="The queue (default: the task's with --app, else 'default').")
@click.option("--priority", type=int, help="Higher runs first (default: the task's, else 0).")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON (see docs/cli.md).")
@app_option
@click.pass_context
@handle_errors
def enqueue(ctx, task, args, delay, job_id, key, queue, priority, as_json, app_spec) -> None:
    """Add a job for TASK with keyword arguments ARGS (a JSON object).

    With --app the task's declaration applies (its queue, attempts, priority, keep and dedupe
    windows), the task must exist, the arguments must fit its handler and --queue must be a
    queue the app knows. Without --app the job is written by name on queue 'default' (or
    --queue) with 20 attempts, for a worker that knows the task; nothing checks the name,
    the arguments or that a worker serves the queue (a note on stderr says so).

    Exit status: 0 the job was added or already existed (the output says which), 2 bad
    input or a store refused."""
    try:
        kwargs = json.loads(args)
    except json.JSONDecodeError as err:
        raise click.BadParameter(f"not JSON: {err}", param_hint="ARGS") from None
    if not isinstance(kwargs, dict):
        raise click.BadParameter("must be a JSON object of keyword arguments", param_hint="ARGS")
    app = command_app(ctx, app_spec)
    if app_spec and queue is not None and queue not in app.known_queues():
        raise click.BadParameter(
            f"the app declares no queue {queue!r} (its queues: {', '.join(app.known_queues())}); "
            "no worker of it would take the job",
            param_hint="--queue",
        )
    options = {"id": job_id, "key": key, "queue": queue}
    if delay is not None:
        options["delay"] = parse_duration(delay, "--delay")
    if priority is not None:
        options["priority"] = priority
    job = app.enqueue(task, kwargs, **{k: v for k, v in options.items() if v is not None})
    if not app_spec and job.created:
        click.echo(
            f"note: written by name without --app, on queue {job.queue!r} with {DEFAULT_ATTEMPTS} "
            "attempts; nothing checked that a worker knows "
            f"task {task!r}, that its handler takes these arguments, or that a worker serves "
            f"queue {job.queue!r}. Give --app MODULE:ATTR to use the task's declaration.",
            err=True,
        )
    if as_json:
        echo_json({**job.to_dict(), "created": job.created})
    elif job.created:
        click.echo(f"added {job.id} ({job.task} on {job.queue}, {job.state})")
    else:
        held = f", holds key {job.key!r}" if key is not None and job.key == key else ""
        click.echo(f"exists, nothing added: {job.id} ({job.task} on {job.queue}, {job.state}{held})")


@click.command("jobs")
@click.option("--state", type=click.Choice(STATES), help="Only jobs in this state.")
@click.option("--queue", help="Only jobs of this queue.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True, help="Jobs shown.")
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True, help="Skip this many first.")
@click.option("--all", "show_all", is_flag=True, help="Every job (no --limit).")
@click.option("--oldest", is_flag=True, help="Oldest first (default: newest first).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (see docs/cli.md).")
@app_option
@click.pass_context
@handle_errors
def list_jobs(ctx, state, queue, limit, offset, show_all, oldest, as_json, app_spec) -> None:
    """List jobs, newest first (--oldest for oldest first), with a line saying how many of
    how many are shown. Page with --offset N --limit M.

    Exit status: 0 listed (even when none), 2 a store unreachable, refused or not there."""
    app = command_app(ctx, app_spec, reading=True)
    counts = app.store.counts(app.clock.store_now())
    total = sum(
        n
        for q, by_state in counts.items()
        if queue in (None, q)
        for s, n in by_state.items()
        if state in (None, s)
    )
    limit = max(total - offset, 1) if show_all else limit
    found = app.jobs(state=state, queue=queue, limit=limit, newest=not oldest, offset=offset)
    order = "oldest" if oldest else "newest"
    summary = f"showing {len(found)} of {total} ({order} first"
    summary += f", from #{offset + 1})" if offset else ")"
    if offset + len(found) < total:
        summary += f"; more with --offset {offset + len(found)}, --limit N or --all"
    if as_json:
        echo_json([job.to_dict() for job in found])
        if len(found) < total:
            click.echo(summary, err=True)
        return
    click.echo(f"{'ID':34} {'TASK':20} {'QUEUE':12} {'STATE':10} {'ATT':>5}  ERROR")
    for job in found:
        error = (job.error or "").strip().splitlines()[-1:] or [""]
        state_text = "cancelling" if job.cancel_requested and job.state == RUNNING else job.state
        click.echo(
            f"{job.id[:34]:34} {job.task[:20]:20} {job.queue[:12]:12} {state_text:10} "
            f"{job.attempts:>2}/{job.max_attempts:<2}  {error[0][:60]}"
        )
    click.echo(summary)


@click.command("job")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (see docs/cli.md).")
@app_option
@click.pass_context
@handle_errors
def show_job(ctx, job_id, as_json, app_spec) -> None:
    """Show one job with its executions.

    Exit status: 0 shown, 1 no such job, 2 a store unreachable, refused or not there."""
    job = command_app(ctx, app_spec, reading=True).get(job_id)
    if job is None:
        click.echo(f"no job {job_id}", err=True)
        sys.exit(EXIT_FINDING)
    if as_json:
        echo_json(job.to_dict())
        return
    click.echo(render(job))


_SHOWN = (
    *("id", "task", "queue", "state", "cancel_requested", "priority", "attempts", "max_attempts"),
    *("due_at", "created_at", "started_at", "finished_at", "key", "group", "after", "ahead"),
    *("args", "result"),
)


def render(job: Job) -> str:
    data = job.to_dict()
    lines = [
        f"{k:16} {json.dumps(data[k]) if k in ('args', 'result', 'after') else data[k]}"
        for k in _SHOWN
        if data[k] not in (None, [], "", False) or k in ("args", "attempts")
    ]
    if job.error:
        lines.append("error:\n  " + job.error.strip().replace("\n", "\n  "))
    for e in data["executions"]:
        lines.append(
            f"execution {e['attempt']}: {e['host']} pid {e['pid']} {e['started_at']} -> "
            f"{e['ended_at'] or 'running'} {e['outcome'] or ''}"
        )
    return "\n".join(lines)


@click.command()
@click.argument("job_id")
@click.option("--timeout", help="Give up after this long (exit 1).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document per change (see docs/cli.md).")
@app_option
@click.pass_context
@handle_errors
def watch(ctx, job_id, timeout, as_json, app_spec) -> None:
    """Print the job once per change until it is done, failed or cancelled; at the end, its
    result (done) or its error (failed, cancelled).

    Exit status: 0 the job is done, 1 it failed, was cancelled, does not exist or the
    --timeout passed first, 2 a store unreachable, refused or not there."""
    app = command_app(ctx, app_spec, reading=True)
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
        sys.exit(EXIT_FINDING)
    if not last.finished:
        click.echo(f"timed out after {timeout}: job {job_id} is still {last.state}", err=True)
        sys.exit(EXIT_FINDING)
    if not as_json:
        if last.state == "done":
            click.echo(f"result: {json.dumps(last.result)}")
        elif last.error:
            click.echo(f"error: {last.error.strip().splitlines()[-1]}")
    if last.state != "done":
        sys.exit(EXIT_FINDING)


@click.command()
@click.argument("job_id")
@app_option
@click.pass_context
@handle_errors
def cancel(ctx, job_id, app_spec) -> None:
    """Cancel a job. A waiting, scheduled or blocked one is removed and never runs. A running
    one is asked to stop: its worker learns of it at the next lease renewal (within half the
    lease, sooner where the store notifies) and its attempt finishes (an async handler is
    cancelled then; a sync one runs to its end); if that attempt succeeds the job ends done
    (the work happened), otherwise cancelled, and it never runs again.

    Exit status: 0 cancelled or cancellation requested, 1 nothing to cancel, 2 a store
    unreachable, refused or not there."""
    app = command_app(ctx, app_spec, reading=True)
    if not app.cancel(job_id):
        click.echo(f"nothing to cancel: no pending or running job {job_id}", err=True)
        sys.exit(EXIT_FINDING)
    after = app.get(job_id, executions=False)  # a waiting job is gone, a running one flagged
    if after is not None and after.cancel_requested:
        click.echo(
            f"cancellation requested for running job {job_id}: its worker learns of it at the "
            "next lease renewal (within half the lease, sooner where the store notifies); the "
            "running attempt finishes (an async handler is cancelled then, a sync one runs to its "
            "end); it ends done if that attempt succeeds, else cancelled, and it never runs again"
        )
    else:
        click.echo(f"cancelled {job_id}: removed, it will not run")


@click.command()
@click.argument("job_id")
@app_option
@click.pass_context
@handle_errors
def retry(ctx, job_id, app_spec) -> None:
    """Run a failed or cancelled job again, with a fresh budget of attempts.

    Exit status: 0 it waits to run again, 1 no failed or cancelled job with that id, 2 a
    store unreachable, refused or not there."""
    if not command_app(ctx, app_spec, reading=True).retry(job_id):
        click.echo(f"cannot retry {job_id}: no failed or cancelled job with that id", err=True)
        sys.exit(EXIT_FINDING)
    click.echo(f"retrying {job_id}")
