"""The throughput chart as SVG drawn on the server: stacked bars of finished executions per
bucket, by outcome. No chart library, no script: the numbers arrive as shapes, and the page's
live refresh swaps the whole SVG."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WIDTH, HEIGHT = 720, 160
# The order of the stack, bottom up; any other outcome is drawn as "other".
OUTCOMES = ("done", "error", "failed", "timeout", "other")


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    outcome: str
    title: str


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: int
    total: dict[str, int]
    width: int = WIDTH
    height: int = HEIGHT


def build(series: dict[str, Any]) -> Chart:
    """Bars for one series of `Source.throughput()`."""
    buckets = series["buckets"]
    stacks = []
    total = dict.fromkeys(OUTCOMES, 0)
    for bucket in buckets:
        stack = dict.fromkeys(OUTCOMES, 0)
        for outcome, count in bucket["counts"].items():
            key = outcome if outcome in OUTCOMES else "other"
            stack[key] += count
            total[key] += count
        stacks.append((bucket["start_at"], stack))
    peak = max((sum(s.values()) for _, s in stacks), default=0)
    bars: list[Bar] = []
    slot = WIDTH / max(1, len(stacks))
    for i, (start, stack) in enumerate(stacks):
        y = float(HEIGHT)
        for outcome in OUTCOMES:
            count = stack[outcome]
            if not count or not peak:
                continue
            height = HEIGHT * count / peak
            y -= height
            title = f"{start}: {count} {outcome}"
            bars.append(
                Bar(
                    round(i * slot, 2),
                    round(y, 2),
                    round(max(1.0, slot - 1), 2),
                    round(height, 2),
                    outcome,
                    title,
                )
            )
    return Chart(bars, peak, total)
