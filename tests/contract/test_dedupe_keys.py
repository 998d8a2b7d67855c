"""JOB-09, the rule for dedup keys (issue 13, item 14): a key is one namespace across every task
and queue of a store. `a.enqueue(key="k")` then `b.enqueue(key="k")` adds nothing and returns
a's job: a shared key is how two tasks exclude each other, and a per-task key is written with the
task in it (`key=f"send_mail:{user_id}"`). Checked on every store."""

from __future__ import annotations

import tinyjobs


def test_job09_a_dedup_key_spans_tasks_and_queues(store):
    app = tinyjobs.App(store)

    @app.task
    def full_sync(run, customer):
        return customer

    @app.task(queue="other")
    def partial_sync(run, customer):
        return customer

    first = full_sync.enqueue(customer=7, key="sync:7")
    second = partial_sync.enqueue(customer=7, key="sync:7")
    assert second.created is False and second.id == first.id
    assert (second.task, second.queue) == ("full_sync", "default"), "the job that holds the key"
    own = partial_sync.enqueue(customer=7, key="partial_sync:7")
    assert own.created and own.task == "partial_sync"
    assert {j.id for j in app.jobs()} == {first.id, own.id}
