"""Grouped (tinyjobs/stores/aio.py) resumes the callers of a batch WAKE per turn of the event loop,
so that fifty callers building their next jobs never hold the loop in one stretch, and what they
add next still goes out as one batch."""

from __future__ import annotations

import asyncio
from collections import Counter

from tinyjobs.stores.aio import WAKE, Grouped
from tinyjobs.stores.base import NewJob

CALLERS, ROUNDS = 50, 4


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

    async def main() -> None:
        done = asyncio.Event()
        ticking = asyncio.create_task(turns(done))
        await asyncio.gather(*(caller(n) for n in range(CALLERS)))
        done.set()
        await ticking

    asyncio.run(main())
    assert sum(resumed_in.values()) == CALLERS * ROUNDS
    assert max(resumed_in.values()) <= min(WAKE, 10), resumed_in.most_common(3)
    assert inner.batches == [CALLERS] * ROUNDS
