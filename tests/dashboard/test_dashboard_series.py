"""The throughput series kept between requests: later reads ask the store only for the last
minutes, and still see every execution that finished since."""

from __future__ import annotations

from tinyjobs.dashboard.series import MARGIN, MinuteSeries


def test_later_reads_fetch_only_the_recent_minutes() -> None:
    store = {0.0: 2, 60.0: 1, 600.0: 4}  # minute -> finished
    asked: list[float] = []

    def fetch(start: float):
        asked.append(start)
        return [(t, "done", n) for t, n in sorted(store.items()) if t >= start]

    series = MinuteSeries()
    assert series.read(fetch, 0.0, 630.0) == [(0.0, "done", 2), (60.0, "done", 1), (600.0, "done", 4)]
    store[600.0] = 5  # one more in the current minute
    store[660.0] = 1
    assert series.read(fetch, 0.0, 700.0) == [
        (0.0, "done", 2),
        (60.0, "done", 1),
        (600.0, "done", 5),
        (660.0, "done", 1),
    ]
    assert asked == [0.0, 600.0 - MARGIN]
    # The window moves on: minutes before `since` are dropped, nothing older is fetched.
    assert series.read(fetch, 60.0, 720.0)[0] == (60.0, "done", 1)
    assert asked[-1] == 660.0 - MARGIN


def test_a_clock_that_went_back_reads_everything_again() -> None:
    asked: list[float] = []
    series = MinuteSeries()
    series.read(lambda s: asked.append(s) or [], 0.0, 10_000.0)
    series.read(lambda s: asked.append(s) or [], 0.0, 500.0)
    assert asked == [0.0, 0.0]


def test_the_overview_counts_executions_that_finish_between_reads(app, client) -> None:
    def finished() -> int:
        hour = client.get("/api/stats").json()["throughput"]["hour"]["buckets"]
        return sum(sum(b["counts"].values()) for b in hour)

    app.enqueue("report", {"day": "a"})
    app.drain()
    assert finished() == 1
    for day in "bcd":
        app.enqueue("report", {"day": day})
    app.drain()
    assert finished() == 4
