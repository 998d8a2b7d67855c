"""Job ids: 12 hex digits of the creation time in milliseconds, then 80 random bits (20 hex
digits), like UUIDv7: ids sort by creation time, so new rows land at the end of the id index
instead of dirtying pages all over it, and two ids made anywhere collide with odds of 2^-80
(per millisecond) at most.

The random bits come from the kernel (os.urandom) but not one call per id: a batch of n ids
takes one urandom of 10n bytes, and single ids come from a spare pool of tails filled by one
urandom of 64 tails at a time, not a getrandom syscall for each. A pool copied into a forked
child would hand the child the parent's next tails: the pool is emptied in the child at every
fork (os.register_at_fork), so each process draws its own. Taking a tail is one list.pop,
atomic between threads, so two threads never take the same one."""

from __future__ import annotations

import os
import time

TAIL_HEX = 20  # 80 random bits
_POOL_TAILS = 64

# Tails not yet given out, of this process only (emptied in a forked child).
_spare: list[str] = []


def _draw(count: int) -> list[str]:
    """`count` fresh random tails from one urandom call."""
    hexes = os.urandom(count * TAIL_HEX // 2).hex()
    return [hexes[k : k + TAIL_HEX] for k in range(0, count * TAIL_HEX, TAIL_HEX)]


def _forget_spare() -> None:
    """In a forked child: the parent holds the same tails, so drop them all."""
    _spare.clear()


os.register_at_fork(after_in_child=_forget_spare)


def _prefix() -> str:
    return f"{time.time_ns() // 1_000_000:012x}"


def new_id() -> str:
    """One job id (see the module's docstring)."""
    try:
        tail = _spare.pop()
    except IndexError:
        tails = _draw(_POOL_TAILS)
        tail = tails.pop()
        _spare.extend(tails)  # another thread may refill at the same time: each adds its own
    return _prefix() + tail


def new_ids(count: int) -> list[str]:
    """`count` job ids made now, from one urandom call: they share the millisecond, so they
    sort after every id made earlier by this clock, and their order among themselves is
    random, as for ids made within one millisecond one by one."""
    if count == 1:
        return [new_id()]
    prefix = _prefix()
    return [prefix + tail for tail in _draw(count)]
