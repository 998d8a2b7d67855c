"""Grouped (tinyjobs/stores/aio.py) resumes the callers of a batch WAKE per turn of the event loop,
so that fifty callers building their next jobs never hold the loop in one stretch, and what they
add next still goes out as one batch."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Awaitable, Callable

from tinyjobs.stores.aio import DECODE, WAKE, Grouped
from tinyjobs.stores.base import NewJob

CALLERS, ROUNDS = 50, 4


async def callers_beside(
    turns: Callable[[asyncio.Event], Awaitable[None]], caller: Callable[[int], Awaitable[None]]
) -> None:
    """Run CALLERS callers to their end beside `turns`, which counts the loop's turns until
    they are done."""
    done = asyncio.Event()
    ticking = asyncio.create_task(turns(done))
    await asyncio.gather(*(caller(n) for n in range(CALLERS)))
    done.set()
    await ticking


class _Inner:
    """An async store that answers every enqueue after a moment, recording the batch sizes."""

    url, capabilities = "fake://", frozenset()

    def __init__(self) -> None:
        self.batches: list[int] = []

    async def enqueue(self, jobs, now=None, conn=None):
        self.batches.append(len(jobs))
        await asyncio.sleep(0.001)
        return [job.id for job in jobs]


def test_callers_resume_a_few_per_turn_and_their_next_jobs_share_one_batch():
    inner = _Inner()
    store = Grouped(inner)
    turn = 0
    resumed_in: Counter[int] = Counter()

    async def turns(done: asyncio.Event) -> None:
        nonlocal turn
        while not done.is_set():
            turn += 1
            await asyncio.sleep(0)

    async def caller(n: int) -> None:
        for r in range(ROUNDS):
            assert await store.enqueue([NewJob(f"{n}-{r}", "t")]) == [f"{n}-{r}"]
            resumed_in[turn] += 1

    asyncio.run(callers_beside(turns, caller))
    assert sum(resumed_in.values()) == CALLERS * ROUNDS
    assert max(resumed_in.values()) <= min(WAKE, 10), resumed_in.most_common(3)
    assert inner.batches == [CALLERS] * ROUNDS


class _Later(_Inner):
    """An async store that leaves each snapshot to decode (DecodesLater), recording the turn
    of the loop in which each one was decoded."""

    def __init__(self, clock: list[int], broken: str = "") -> None:
        super().__init__()
        self.clock, self.broken = clock, broken
        self.decoded_in: Counter[int] = Counter()

    async def enqueue_later(self, jobs, now=None):
        self.batches.append(len(jobs))
        await asyncio.sleep(0.001)
        return [functools.partial(self._decode, job.id) for job in jobs]

    def _decode(self, job_id: str) -> str:
        self.decoded_in[self.clock[0]] += 1
        if job_id == self.broken:
            raise ValueError(f"cannot decode {job_id}")
        return job_id


def test_snapshots_are_decoded_a_few_per_turn_as_their_callers_resume():
    clock = [0]
    inner = _Later(clock, broken="7-0")
    store = Grouped(inner)
    assert store._later is not None  # the store decodes later: the test is about that path
    results: dict[int, object] = {}

    async def turns(done: asyncio.Event) -> None:
        while not done.is_set():
            clock[0] += 1
            await asyncio.sleep(0)

    async def caller(n: int) -> None:
        many = 40 if n == 0 else 1  # one caller's many jobs are decoded over several turns too
        jobs = [NewJob(f"{n}-{i}", "t") for i in range(many)]
        try:
            results[n] = await store.enqueue(jobs)
        except ValueError as err:
            results[n] = err

    asyncio.run(callers_beside(turns, caller))
    assert inner.batches == [CALLERS - 1 + 40]
    assert sum(inner.decoded_in.values()) == CALLERS - 1 + 40
    assert max(inner.decoded_in.values()) <= DECODE, inner.decoded_in.most_common(3)
    assert results[0] == [f"0-{i}" for i in range(40)]
    # A snapshot that does not decode fails its own caller, and no other.
    assert isinstance(results[7], ValueError)
    assert all(results[n] == [f"{n}-0"] for n in range(1, CALLERS) if n != 7)
