"""Event-loop lag while aenqueue runs, and aenqueue throughput against sync enqueue, per store.

    python benchmarks/loop_lag.py                      # memory, sqlite, postgres, redis
    python benchmarks/loop_lag.py --stores postgres --jobs 2000 --runs 3
    /work/wt/base/.venv/bin/python benchmarks/loop_lag.py --tree /work/wt/base   # A/B

For each store, with a 1 ms ticker on the loop (each tick `await asyncio.sleep(0.001)`; its
lag is how much later than 1 ms it woke):
- idle: the ticker alone, the machine's own noise;
- aenqueue: `--jobs` aenqueue calls from `--tasks` concurrent tasks (1,000 from 50 by default);
- blocking: the same number of sync `enqueue` calls made from one coroutine, the mistake the
  async calls exist to avoid, for contrast;
and throughput: aenqueue from `--tasks` tasks, aenqueue from one task in sequence, and sync
enqueue from one thread. `turn p99` is the loop thread's CPU time per turn of the loop (one
`_run_once`) during the aenqueue run: the stretch no timer can interrupt, which the machine's
load does not inflate as it does the wall-clock lag. `own p99` is the lag less the time the
loop's thread spent runnable but not running (Linux schedstat): what is left is the lag of this
process's own making (the loop's work, and waiting for the GIL held by another thread), with
the machine's other load taken out. `pool max` is the longest CPU time of one enqueue call in the
async front door's threads (SQLite, memory), which hold the GIL for most of it.
With --runs N each store's ticks of the N runs are also pooled: one run's ~100 ticks make its p99
its largest lag, the pooled ticks a p99 worth the name.
Targets (issue 15): aenqueue p99 lag <= 2 ms; aenqueue throughput within 20 % of sync enqueue from one thread.

Each store is fresh: a new SQLite file, a new PostgreSQL schema (dropped afterwards), a new
Redis key prefix (deleted afterwards). Servers from $TINYJOBS_TEST_POSTGRES and
$TINYJOBS_TEST_REDIS (the test suite's defaults otherwise)."""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if "--tree" in sys.argv:  # A/B: import tinyjobs from another checkout (its venv's python)
    ROOT = Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()
sys.path.insert(0, str(ROOT))

import tinyjobs  # noqa: E402

POSTGRES = os.environ.get("TINYJOBS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("TINYJOBS_TEST_REDIS", "redis://127.0.0.1:6379/15")
TICK = 0.001


def store_url(kind: str, tmp: str) -> str:
    tag = secrets.token_hex(4)
    return {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp}/lag-{tag}.db",
        "postgres": f"{POSTGRES}{'&' if '?' in POSTGRES else '?'}schema=lag_{tag}",
        "redis": f"{REDIS}{'&' if '?' in REDIS else '?'}prefix=lag-{tag}",
    }[kind]


def make_app(url: str) -> tuple[tinyjobs.App, Any]:
    app = tinyjobs.App(url)

    @app.task
    def noop(run: tinyjobs.Run, n: int) -> None:
        return None

    return app, noop


CPU_LAGS: list[float] = []  # of the last ticking() run: see below
OWN_LAGS: list[float] = []  # of the last ticking() run: the lag less the time spent runnable
SCHEDSTAT = f"/proc/self/task/{threading.get_native_id()}/schedstat"


def run_queue_wait() -> float:
    """Seconds this thread has spent runnable but not running (waiting for a CPU the machine
    gave to other threads or processes): the second field of Linux's schedstat; 0 elsewhere.
    Waiting for the GIL is a sleep, not a wait on the run queue, so it is not counted here."""
    try:
        with open(SCHEDSTAT) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


TURNS: list[float] = []  # of the last ticking() run: the loop thread's CPU time per turn


def _counting_turns(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Record the CPU time of each turn of `loop` (one _run_once: every callback ready at its
    start, timers included) in TURNS; returns the undo. The longest turns bound the lag a
    timer can suffer from the loop's own work, whatever the machine's load."""
    run_once = loop._run_once  # type: ignore[attr-defined]

    def timed() -> None:
        start = time.thread_time()
        run_once()
        TURNS.append(time.thread_time() - start)

    loop._run_once = timed  # type: ignore[attr-defined]
    return lambda: delattr(loop, "_run_once")


async def ticking(work: Callable[[], Awaitable[None]]) -> tuple[list[float], float]:
    """Run `work()` with the 1 ms ticker beside it; the ticks' lags (seconds) and its time.

    Also kept, in CPU_LAGS: the loop thread's CPU time over each tick (time.thread_time), the
    time the loop itself was busy running other callbacks while the tick waited. Unlike the
    wall-clock lag it does not count time the OS gave to other processes, so on a shared,
    loaded machine it shows what the code holds the loop for."""
    lags: list[float] = []
    CPU_LAGS.clear()
    OWN_LAGS.clear()
    TURNS.clear()
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start, cpu, queued = time.perf_counter(), time.thread_time(), run_queue_wait()
            await asyncio.sleep(TICK)
            lags.append(time.perf_counter() - start - TICK)
            CPU_LAGS.append(time.thread_time() - cpu)
            OWN_LAGS.append(max(0.0, lags[-1] - (run_queue_wait() - queued)))

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)  # the ticker is running before the work starts
    start = time.perf_counter()
    undo = _counting_turns(asyncio.get_running_loop())
    try:
        await work()
    finally:
        undo()
    elapsed = time.perf_counter() - start
    done.set()
    await tick
    return lags, elapsed


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


POOL_CPU: list[float] = []  # CPU time of each enqueue call run in the async pool's threads


def counting_pool_cpu(store: Any) -> None:
    """Record in POOL_CPU the thread CPU time of each `store.enqueue` made from the async
    front door's thread pool (SQLite, memory: stores/aio.py ThreadedStore). That thread holds
    the GIL for most of it, and the loop may wait for the GIL meanwhile, so the longest calls
    bound the lag the pool can cause; CPU time, unlike the lag, does not grow with the load
    of the rest of the machine."""
    enqueue = store.enqueue

    def timed(*args: Any, **kwargs: Any) -> Any:
        if not threading.current_thread().name.startswith("tinyjobs-aio"):
            return enqueue(*args, **kwargs)
        start = time.thread_time()
        try:
            return enqueue(*args, **kwargs)
        finally:
            POOL_CPU.append(time.thread_time() - start)

    store.enqueue = timed


async def measure(kind: str, jobs: int, tasks: int, tmp: str) -> dict[str, Any]:
    url = store_url(kind, tmp)
    app, noop = make_app(url)
    counting_pool_cpu(app.store)
    await noop.aenqueue(n=-1)  # opens the store and this loop's connections
    await asyncio.to_thread(noop.enqueue, n=-2)  # and the sync store's, in a thread
    per_task = jobs // tasks

    async def idle() -> None:
        await asyncio.sleep(1.0)

    async def concurrent() -> None:
        async def one(t: int) -> None:
            for i in range(per_task):
                await noop.aenqueue(n=t * per_task + i)

        await asyncio.gather(*(one(t) for t in range(tasks)))

    async def sequential() -> None:
        for i in range(jobs):
            await noop.aenqueue(n=i)

    async def blocking() -> None:
        for i in range(jobs):
            noop.enqueue(n=i)  # the sync call on the loop: what not to do

    idle_lags, _ = await ticking(idle)
    POOL_CPU.clear()
    lags, concurrent_s = await ticking(concurrent)
    pool_cpu = list(POOL_CPU)
    cpu_lags, own_lags, turns = list(CPU_LAGS), list(OWN_LAGS), list(TURNS)
    _, sequential_s = await ticking(sequential)
    blocking_lags, _ = await ticking(blocking)

    def sync_from_one_thread() -> float:
        start = time.perf_counter()
        for i in range(jobs):
            noop.enqueue(n=i)
        return time.perf_counter() - start

    sync_s = await asyncio.to_thread(sync_from_one_thread)
    await app.aclose()
    cleanup(kind, url)
    return {
        "store": kind,
        "idle_p99_ms": p(idle_lags, 0.99) * 1000,
        "lag_p50_ms": p(lags, 0.50) * 1000,
        "lag_p99_ms": p(lags, 0.99) * 1000,
        "lag_max_ms": max(lags) * 1000,
        "lags": lags,
        "own_lags": own_lags,
        "cpu_p99_ms": p(cpu_lags, 0.99) * 1000,
        "own_p99_ms": p(own_lags, 0.99) * 1000,
        "pool_max_ms": max(pool_cpu) * 1000 if pool_cpu else float("nan"),
        "turn_p99_ms": p(turns, 0.99) * 1000,
        "ticks": len(lags),
        "blocking_p99_ms": p(blocking_lags, 0.99) * 1000,
        "blocking_max_ms": max(blocking_lags) * 1000 if blocking_lags else float("nan"),
        "aenqueue_concurrent_per_s": jobs / concurrent_s,
        "aenqueue_sequential_per_s": jobs / sequential_s,
        "enqueue_sync_per_s": jobs / sync_s,
    }


def cleanup(kind: str, url: str) -> None:
    if kind == "postgres":
        import psycopg
        from psycopg import sql

        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    elif kind == "redis":
        from tinyjobs.stores.redis import open as open_redis

        store = open_redis(url)
        store.drop()
        store.close()


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--stores", default="memory,sqlite,postgres,redis")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--tree", help="import tinyjobs from this checkout (A/B runs)")
    args = parser.parse_args()
    print(
        f"{'store':9} {'idle p99':>9} {'lag p50':>8} {'lag p99':>8} {'lag max':>8} "
        f"{'cpu p99':>8} {'own p99':>8} {'turn p99':>9} {'pool max':>9} {'ticks':>6} "
        f"{'blocking p99':>13} {'aenq x' + str(args.tasks):>9} {'aenq x1':>8} {'sync':>8} {'ratio':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            pooled: list[float] = []
            pooled_own: list[float] = []
            for _ in range(args.runs):
                r = asyncio.run(measure(kind, args.jobs, args.tasks, tmp))
                pooled += r["lags"]
                pooled_own += r["own_lags"]
                ratio = r["aenqueue_concurrent_per_s"] / r["enqueue_sync_per_s"]
                print(
                    f"{kind:9} {r['idle_p99_ms']:8.2f}m {r['lag_p50_ms']:7.2f}m {r['lag_p99_ms']:7.2f}m "
                    f"{r['lag_max_ms']:7.2f}m {r['cpu_p99_ms']:7.2f}m {r['own_p99_ms']:7.2f}m "
                    f"{r['turn_p99_ms']:8.2f}m {r['pool_max_ms']:8.2f}m "
                    f"{r['ticks']:6d} "
                    f"{r['blocking_p99_ms']:12.2f}m "
                    f"{r['aenqueue_concurrent_per_s']:8.0f}/s {r['aenqueue_sequential_per_s']:7.0f}/s "
                    f"{r['enqueue_sync_per_s']:7.0f}/s {ratio:6.2f}",
                    flush=True,
                )
            if args.runs > 1:
                # One run's ~100 ticks make its "p99" its largest lag; the ticks of all runs of
                # the same workload give a p99 worth the name.
                print(
                    f"{kind:9} pooled over {args.runs} runs, {len(pooled)} ticks: lag p50 "
                    f"{p(pooled, 0.5) * 1000:.2f} ms, p99 {p(pooled, 0.99) * 1000:.2f} ms, max "
                    f"{max(pooled) * 1000:.2f} ms; own p99 {p(pooled_own, 0.99) * 1000:.2f} ms",
                    flush=True,
                )


if __name__ == "__main__":
    main()
