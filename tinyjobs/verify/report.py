"""The accounting and the report of `tinyjobs verify`, after Jepsen's total-queue checker.

Jobs are matched by number. Each number sent ends as succeeded, failed, cancelled, unfinished
(still pending or running) or lost (acknowledged by the store, and then not in it). A number
whose enqueue raised but that the store holds all the same is recovered, and counted by its
state. Ledger rows or jobs that verify never sent are unexpected; a number that ran twice at one
attempt, or that the store said it already had, was enqueued twice."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..job import CANCELLED, DONE, FAILED, Job
from .fleet import FleetRecord
from .ledger import Ledger

SHOW = 5  # ids named in a failure line


@dataclass
class Sent:
    """What the sender saw: when each number was sent, which were acknowledged, which raised,
    and which the store said it already had."""

    total: int = 0
    at: dict[int, float] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    failed: dict[int, str] = field(default_factory=dict)
    existed: set[int] = field(default_factory=set)


@dataclass
class Tally:
    """Each number by how it ended, and what the ledger says about it."""

    succeeded: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    recovered: list[int] = field(default_factory=list)
    missing_effect: list[int] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    twice: list[int] = field(default_factory=list)
    reran: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


def tally(sent: Sent, jobs: dict[int, Job] | None, ledger: Ledger | None, foreign: Iterable[str]) -> Tally:
    """Account for every number sent; `jobs` is the store's job of each number (None when the
    store could not be read: every number is then unfinished, its end unknown), `foreign` the
    ids in verify's queue that are not its own, `ledger` None when it could not be read."""
    out = Tally(unexpected=sorted(foreign))
    if jobs is None:
        out.unfinished = sorted(sent.at)
        return out
    buckets = {DONE: out.succeeded, FAILED: out.failed, CANCELLED: out.cancelled}
    for n in sorted(sent.at):
        job = jobs.get(n)
        if job is None:
            if n in sent.acked:
                out.lost.append(n)
            continue
        if n not in sent.acked:
            out.recovered.append(n)
        buckets.get(job.state, out.unfinished).append(n)
        if job.attempts > 1:
            out.reran.append(n)
    out.twice = sorted(sent.existed)
    if ledger is not None:
        _read_ledger(out, sent, jobs, ledger)
    return out


def _read_ledger(out: Tally, sent: Sent, jobs: dict[int, Job], ledger: Ledger) -> None:
    for n in out.succeeded:
        if n not in ledger.applied:
            out.missing_effect.append(n)
        elif n in sent.at:
            out.latencies.append(ledger.applied[n] - sent.at[n])
    for n, job_id in ledger.applied_ids.items():
        if n not in sent.at or (n in jobs and jobs[n].id != job_id):
            out.unexpected.append(f"ledger row {n} ({job_id})")
    for n, attempts in ledger.runs.items():
        if len(attempts) > 1 and n not in out.reran:
            out.reran.append(n)
        if len(set(attempts)) < len(attempts) and n not in out.twice:
            out.twice.append(n)
    out.reran.sort()
    out.twice.sort()


@dataclass
class Verdict:
    """Everything the report needs besides the tally."""

    run: str
    fleet: FleetRecord
    ledger_error: str | None = None
    settled: bool = True
    live_left: int = 0
    store_errors: list[str] = field(default_factory=list)
    cut_short: bool = False
    others: int = 0
    left: int = 0
    keep: bool = False
    created: str | None = None  # a store file that the run created (it stays, empty of jobs)


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    return f"{count:,} {noun if count == 1 else plural_noun or noun + 's'}"


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def render(sent: Sent, t: Tally, v: Verdict) -> tuple[list[str], list[str]]:
    """The report (five lines, then `ok` or one `failed:` line per cause) and the causes."""
    lines = [
        f"sent {plural(sent.total, 'job')}: {len(t.succeeded):,} succeeded, {len(t.failed):,} "
        f"failed, {len(t.cancelled):,} cancelled, {len(t.unfinished):,} unfinished, "
        f"{len(t.lost):,} lost",
        _workers_line(v.fleet),
        _reruns_line(t, v),
        _latency_line(t.latencies),
        _store_line(sent, t, v),
    ]
    causes = failures(sent, t, v)
    if not v.fleet.by_signal[signal.SIGKILL]:
        lines.append(
            "warning: no worker was killed with SIGKILL, so recovery from a crash was not "
            "exercised; run longer (--duration) or stop workers more often (--kill-every)"
        )
    return lines + ([f"failed: {c}" for c in causes] if causes else ["ok"]), causes


def _workers_line(fleet: FleetRecord) -> str:
    term, kill = fleet.by_signal[signal.SIGTERM], fleet.by_signal[signal.SIGKILL]
    return (
        f"workers stopped {plural(fleet.kills, 'time')}, {term:,} by SIGTERM and {kill:,} by "
        f"SIGKILL, {plural(len(fleet.unexpected), 'unexpected death')}"
    )


def _reruns_line(t: Tally, v: Verdict) -> str:
    ran = f"{plural(len(t.reran), 'job')} ran more than once"
    if t.reran:
        ran += ", after the kills" if v.fleet.by_signal[signal.SIGKILL] else ", with no SIGKILL to explain it"
    if v.ledger_error is not None:
        return f"{ran}; the ledger could not be read"
    if t.missing_effect:
        return f"{ran}; {plural(len(t.missing_effect), 'job')} succeeded without its side effect"
    return f"{ran}; every job applied its side effect once"


def _latency_line(latencies: list[float]) -> str:
    if not latencies:
        return "end-to-end latency not measured: no job applied its side effect"
    p50, p95 = (round(percentile(latencies, f) * 1000) for f in (0.5, 0.95))
    return f"end-to-end p50 {p50:,} ms, p95 {p95:,} ms, kills included"


def _store_line(sent: Sent, t: Tally, v: Verdict) -> str:
    failed = plural(len(sent.failed), "enqueue failure")
    if t.recovered:
        failed += f" ({len(t.recovered):,} taken by the store all the same)"
    if v.others:
        where = f"{plural(v.others, 'other job')} appeared during the run, so nothing was purged"
    elif v.keep:
        where = f"the store keeps its {plural(v.left, 'job')} (--keep)"
    elif v.left:
        where = f"{plural(v.left, 'job')} left in the store"
    elif v.created:
        where = f"the run's jobs were purged; the SQLite file {v.created} it created stays, empty"
    else:
        where = "the store is left as it was found"
    return f"{failed}; {where}"


def _ids(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:SHOW])
    return f" (job {shown}{', ...' if len(numbers) > SHOW else ''})"


def failures(sent: Sent, t: Tally, v: Verdict) -> list[str]:
    """Every cause of exit 1, in the order of the report."""
    out: list[str] = []
    for numbers, what in (
        (t.lost, "lost"),
        (t.failed, "failed"),
        (t.cancelled, "cancelled"),
        (t.unfinished, "unfinished"),
        (t.missing_effect, "without its side effect"),
        (t.twice, "enqueued twice"),
    ):
        if numbers:
            out.append(f"{plural(len(numbers), 'job')} {what}{_ids(numbers)}")
    if t.unexpected:
        out.append(f"{len(t.unexpected):,} unexpected: {', '.join(t.unexpected[:SHOW])}")
    if v.ledger_error is not None:
        out.append(f"the ledger could not be read: {v.ledger_error}")
    for pid, status in v.fleet.unexpected:
        out.append(f"worker {pid} died on its own (exit status {status})")
    for pid, what in v.fleet.unclean:
        out.append(f"worker {pid} did not stop cleanly: {what}")
    if sent.failed:
        first = next(iter(sent.failed.items()))
        out.append(f"{plural(len(sent.failed), 'enqueue')} failed, first job {first[0]}: {first[1]}")
    if not v.settled:
        out.append(f"the store did not settle: {plural(v.live_left, 'job')} still pending or running")
    for error in v.store_errors[:SHOW]:
        out.append(f"the store failed mid-run: {error}")
    if v.cut_short:
        out.append("the run was cut short")
    elif v.fleet.kills == 0:
        out.append("the run was too short to kill anyone")
    if v.left and not v.keep and not v.others:
        out.append(f"{plural(v.left, 'job')} left in the store")
    return out
