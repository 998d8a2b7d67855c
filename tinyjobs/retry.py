"""Backoff between attempts of a raising handler (JOB-07): 1 s, 2 s, 4 s, ... up to 1 h, ±10 %."""

from __future__ import annotations

import random

BASE_SECONDS = 1.0
CAP_SECONDS = 3600.0
JITTER = 0.10


def backoff(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based) before the next one.

    The wait doubles per attempt from 1 s and stops growing at 1 h; each wait is spread by
    ±10 % at random so that many jobs failing together do not retry in the same instant."""
    exponent = max(0, attempt - 1)
    base = CAP_SECONDS if exponent >= 12 else min(CAP_SECONDS, BASE_SECONDS * (2**exponent))
    spread = (rng or random).uniform(-JITTER, JITTER)
    return base * (1.0 + spread)
