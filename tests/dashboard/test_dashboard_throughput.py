"""The throughput series on the overview counts every execution that finished, read after read."""

from __future__ import annotations


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
