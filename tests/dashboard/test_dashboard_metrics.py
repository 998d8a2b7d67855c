"""`/metrics`: the Prometheus text format, parsed by the Prometheus client's own parser, with the
names and labels SPEC.md sets, on every store."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from support.wait import wait_until

from tinyjobs.dashboard.metrics import DURATION_BUCKETS
from tinyjobs.stores.base import WorkerBeat

ALLOWED_LABELS = {"queue", "state", "task", "outcome", "le"}


def scrape(client) -> dict[str, object]:
    reply = client.get("/metrics")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    return reply.text, {family.name: family for family in text_string_to_metric_families(reply.text)}


def value(family, **labels) -> float:
    found = [s.value for s in family.samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (family.name, labels, family.samples)
    return found[0]


def test_metrics_parse_with_prometheus_names_and_values(app, client) -> None:
    ids = [app.enqueue("send", {"to": f"u{i}", "fail": i < 2}).id for i in range(5)]
    app.drain(["mail"])
    app.enqueue("report", {"day": "d"})
    app.store.beat(WorkerBeat("h", 7, ("mail",), 8, 2, app.store.now() - 10))
    app.pause("reports")
    text, families = scrape(client)

    assert set(families) == {
        "tinyjobs_jobs",
        "tinyjobs_queue_oldest_waiting_age_seconds",
        "tinyjobs_queue_paused",
        "tinyjobs_jobs_past_lease",
        "tinyjobs_executions_finished",  # the parser names a counter family without its _total
        "tinyjobs_execution_duration_seconds",
        "tinyjobs_workers",
        "tinyjobs_worker_slots",
        "tinyjobs_worker_slots_busy",
    }
    for family in families.values():
        assert family.name.startswith("tinyjobs_")
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, sample
            if family.type == "counter":
                assert sample.name.endswith("_total")
    assert not any(job_id in text for job_id in ids)  # never a job id

    assert families["tinyjobs_jobs"].type == "gauge"
    assert value(families["tinyjobs_jobs"], queue="mail", state="failed") == 2
    assert value(families["tinyjobs_jobs"], queue="mail", state="done") == 3
    assert value(families["tinyjobs_jobs"], queue="reports", state="waiting") == 1
    assert value(families["tinyjobs_queue_paused"], queue="reports") == 1
    assert value(families["tinyjobs_queue_paused"], queue="mail") == 0
    assert value(families["tinyjobs_queue_oldest_waiting_age_seconds"], queue="reports") >= 0

    finished = families["tinyjobs_executions_finished"]
    assert finished.type == "counter"
    assert value(finished, queue="mail", outcome="done") == 3
    assert value(finished, queue="mail", outcome="error") == 2

    hist = families["tinyjobs_execution_duration_seconds"]
    assert hist.type == "histogram"
    buckets = [s for s in hist.samples if s.name.endswith("_bucket") and s.labels["queue"] == "mail"]
    assert [s.labels["le"] for s in buckets][-1] == "+Inf" and len(buckets) == len(DURATION_BUCKETS) + 1
    assert float(buckets[0].labels["le"]) == 0.01 and float(buckets[-2].labels["le"]) == 3600
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and counts[-1] == 5  # cumulative, ending at every execution
    count = [s.value for s in hist.samples if s.name.endswith("_count") and s.labels["queue"] == "mail"]
    total = [s.value for s in hist.samples if s.name.endswith("_sum") and s.labels["queue"] == "mail"]
    assert count == [5] and 0 <= total[0] < 60

    assert value(families["tinyjobs_workers"], state="live") == 1
    assert value(families["tinyjobs_worker_slots"]) == 8
    assert value(families["tinyjobs_worker_slots_busy"]) == 2


def test_metrics_of_an_empty_store_still_parse(app, client) -> None:
    _, families = scrape(client)
    # The app names the queue "mail": it appears with zero jobs.
    assert value(families["tinyjobs_jobs"], queue="mail", state="waiting") == 0
    assert value(families["tinyjobs_workers"], state="live") == 0
    assert families["tinyjobs_execution_duration_seconds"].samples == []


def test_metrics_count_running_jobs_past_their_lease_per_queue(app, client) -> None:
    from tinyjobs.holder import Holder
    from tinyjobs.stores.base import QueuePolicy

    for i in range(3):
        app.enqueue("send", {"to": f"u{i}"})
    app.enqueue("report", {"day": "d"})
    store = app.store
    # Two leases that run out at once (as when their worker is gone), one still live.
    taken = store.now()
    stale = store.claim({"mail": QueuePolicy("mail", lease=0.05)}, Holder.current(), 2, now=taken)
    live = store.claim({"mail": QueuePolicy("mail", lease=600.0)}, Holder.current(), 1, now=taken)
    assert len(stale) == 2 and len(live) == 1
    wait_until(lambda: store.now() > taken + 0.1, timeout=5, what="the short leases to run out")
    _, families = scrape(client)
    past = families["tinyjobs_jobs_past_lease"]
    assert past.type == "gauge"
    assert value(past, queue="mail") == 2 and value(past, queue="reports") == 0
    assert value(families["tinyjobs_jobs"], queue="mail", state="running") == 3
    assert store.reap() == 2  # once reaped, they are no longer running past their lease
    _, families = scrape(client)
    assert value(families["tinyjobs_jobs_past_lease"], queue="mail") == 0
