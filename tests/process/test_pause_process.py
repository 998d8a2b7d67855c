"""LIM-04 with a real `tinyjobs worker` process on SQLite: a paused queue's jobs are not taken
while the worker keeps taking other queues' jobs; a running job of a queue paused under it
finishes; resume makes the worker take them at once. The worker's heartbeat lists it."""

from __future__ import annotations

import time

from support.wait import wait_until


def test_lim04_a_real_worker_stops_taking_a_paused_queue_and_resumes_at_once(workers, app):
    app.pause("default")
    paused_job = app.enqueue("record", {"n": 1})  # queue default
    proc = workers.start()
    wait_until(
        lambda: any(w.pid == proc.pid for w in app.store.workers()),
        timeout=15,
        what="the worker's heartbeat",
    )
    # A job of another queue, enqueued after the paused one, runs: the worker is claiming.
    sentinel = app.enqueue("hold", {"seconds": 0})
    wait_until(lambda: app.get(sentinel.id).state == "done", timeout=15, what="the sentinel job")
    assert app.get(paused_job.id).state == "waiting"
    assert not [m for m in workers.marks() if m["job"] == paused_job.id]

    resumed = time.monotonic()
    app.resume("default")
    wait_until(lambda: app.get(paused_job.id).state == "done", timeout=15, what="the resumed job")
    assert time.monotonic() - resumed < 2.0  # at once: the worker's next look, not a timeout


def test_lim04_a_running_job_of_a_queue_paused_under_it_finishes(workers, app):
    job = app.enqueue("hold", {"seconds": 1})  # queue short
    workers.start()
    wait_until(lambda: app.get(job.id).state == "running", timeout=15, what="the job to start")
    app.pause("short")
    later = app.enqueue("hold", {"seconds": 0})
    wait_until(lambda: app.get(job.id).state == "done", timeout=15, what="the running job to finish")
    assert app.get(later.id).state == "waiting"
    assert [m["job"] for m in workers.marks() if m["kind"] == "start"] == [job.id]
