"""LIM-01/02 and CRON-01 with several real `tinyjobs worker` processes on one SQLite file:
limits hold across processes (counted from the handlers' own records of overlapping runs), and
cron fires each due time exactly once, a restart across a due time included."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from support.processes import WorkerProcesses, import_app
from support.wait import wait_until

HERE = Path(__file__).resolve().parent


@pytest.fixture
def flow(tmp_path):
    workers = WorkerProcesses(tmp_path, "flowapp:app", HERE, marks_file="flow.jsonl")
    yield workers
    workers.stop_all()


@pytest.fixture
def app(flow):
    app = import_app("flowapp", HERE, flow.url)
    yield app
    app.close()


def max_overlap(marks: list[dict]) -> int:
    """The most runs at once, from start and end lines (an end sorts before a start at a tie)."""
    edges = sorted((m["t"], 0 if m["kind"] == "end" else 1) for m in marks)
    live = peak = 0
    for _, is_start in edges:
        live += 1 if is_start else -1
        peak = max(peak, live)
    return peak


def most_in_a_window(times: list[float], period: float) -> int:
    """The most of `times` inside any half-open window [t, t + period)."""
    times = sorted(times)
    return max((sum(1 for u in times if t <= u < t + period) for t in times), default=0)


def wait_done(app, queue: str, n: int, timeout: float = 60.0) -> None:
    wait_until(
        lambda: app.store.counts().get(queue, {}).get("done") == n,
        timeout=timeout,
        interval=0.1,
        what=f"{n} jobs of {queue} to be done",
    )


def test_lim01_concurrency_and_group_concurrency_hold_across_worker_processes(flow, app):
    app.enqueue_many([("capped", {"seconds": 0.15}) for _ in range(30)])
    # Four one-slot processes for a limit of three: only the limit, counted across processes,
    # keeps a fourth job from running (one process with many slots would refill its own places).
    for _ in range(4):
        flow.start("--slots", "1")
    wait_done(app, "capped", 30)
    for group in ("a", "b", "c"):  # once the capped queue is done, so all four places are free
        app.enqueue_many([("grouped", {"seconds": 0.1}) for _ in range(6)], group=group)
    wait_done(app, "grouped", 18)
    capped = [m for m in flow.marks() if m["queue"] == "capped"]
    assert len(capped) == 60 and max_overlap(capped) <= 3
    assert len({m["pid"] for m in capped}) >= 2, "every job ran in one process: nothing was proven"
    grouped = [m for m in flow.marks() if m["queue"] == "grouped"]
    by_group = defaultdict(list)
    for m in grouped:
        by_group[m["group"]].append(m)
    assert {g: max_overlap(ms) for g, ms in by_group.items()} == {"a": 1, "b": 1, "c": 1}
    assert max_overlap(grouped) >= 2  # groups did run beside each other (LIM-03)


def test_lim02_rate_and_group_rate_hold_in_every_window_across_worker_processes(flow, app):
    for _ in range(3):
        flow.start("--slots", "4")
    # All three compete from the first job on: a worker that started seconds before the others
    # (a loaded machine) could take every job alone, and prove nothing across processes.
    wait_until(lambda: len(flow.events("worker.started")) == 3, timeout=60, what="three workers")
    app.enqueue_many([("rated", {"seconds": 0.0}) for _ in range(16)])
    for group in ("a", "b"):
        app.enqueue_many([("group_rated", {"seconds": 0.0}) for _ in range(5)], group=group)
    wait_done(app, "rated", 16)
    wait_done(app, "group_rated", 10)
    rated = flow.marks("start")
    # Judged on the store's clock: the claim times each handler was given.
    claims = [m["claimed"] for m in rated if m["queue"] == "rated"]
    assert len(claims) == 16 and most_in_a_window(claims, 1.0) <= 5
    assert max(claims) - min(claims) >= 3.0  # 16 starts at 5/s need three full windows
    for group in ("a", "b"):
        times = [m["claimed"] for m in rated if m["queue"] == "group_rated" and m["group"] == group]
        assert len(times) == 5 and most_in_a_window(times, 1.0) <= 2
    assert len({m["pid"] for m in rated}) >= 2, "every job ran in one process: nothing was proven"


def test_cron01_several_worker_processes_fire_each_due_time_exactly_once(flow, app):
    flow.env["TJ_FLOW_CRON"] = "each_second"
    procs = [flow.start("--slots", "2") for _ in range(3)]
    wait_until(lambda: len(flow.events("worker.started")) == 3, timeout=60, what="three workers")
    contested = time.time()  # from here on three processes compete for every due time
    wait_until(
        lambda: len([m for m in flow.marks("cron") if m["due"] > contested]) >= 8,
        timeout=60,
        interval=0.2,
        what="8 cron runs while three workers compete",
    )
    assert [proc.poll() for proc in procs] == [None] * 3, "a worker died: fewer than three competed"
    for proc in procs:
        flow.stop(proc)
    fired = [e["job_id"] for e in flow.events("cron.fired")]
    assert len(fired) >= 8
    assert len(fired) == len(set(fired)), f"fired twice: {Counter(fired).most_common(3)}"
    dues = sorted(int(job_id.rsplit(":", 1)[1]) for job_id in fired)
    assert dues == list(range(dues[0], dues[0] + len(dues))), f"a due time never fired: {dues}"
    ran = Counter(m["due"] for m in flow.marks("cron"))
    assert max(ran.values()) == 1
    assert set(ran) <= set(map(float, dues))
    started = {e["pid"] for e in flow.events("worker.started")}
    assert started == {proc.pid for proc in procs}
    assert {e["pid"] for e in flow.events("cron.fired")} <= started


def set_clock(path: Path, when: float) -> None:
    """Move the workers' clock (flowapp's FileClock): written whole, then renamed into place."""
    part = path.with_suffix(".part")
    part.write_text(repr(when))
    os.replace(part, path)


def fired_dues(flow) -> list[int]:
    return [int(e["job_id"].rsplit(":", 1)[1]) for e in flow.events("cron.fired")]


def test_cron01_a_worker_restart_across_a_due_time_still_fires_it(flow, app):
    """The workers' clock is a file the test moves, so no worker runs while the due time
    passes, however slow the machine."""
    clock = flow.tmp / "clock"
    first_due = int(time.time()) // 5 * 5
    set_clock(clock, first_due + 1)
    flow.env.update(TJ_FLOW_CRON="every_five", TJ_FLOW_CLOCK=str(clock))
    first = flow.start("--slots", "2")
    wait_until(lambda: flow.events("cron.fired"), timeout=60, interval=0.1, what="a first fire")
    last = fired_dues(flow)[-1]
    assert last == first_due
    flow.stop(first, signal.SIGKILL)
    missed = last + 5
    set_clock(clock, missed + 2)  # the due time passes while no worker runs
    assert fired_dues(flow) == [first_due]
    flow.start("--slots", "2")
    wait_until(
        lambda: f"cron:every_five:{missed}" in {e["job_id"] for e in flow.events("cron.fired")},
        timeout=30,
        interval=0.1,
        what=f"the missed due time {missed} to fire after the restart",
    )
    wait_until(
        lambda: missed in {int(m["due"]) for m in flow.marks("cron")},
        timeout=30,
        interval=0.1,
        what="the missed due time's job to run",
    )
    fired = [e["job_id"] for e in flow.events("cron.fired")]
    assert len(fired) == len(set(fired))
    assert app.get(f"cron:every_five:{missed}").due_at == missed
