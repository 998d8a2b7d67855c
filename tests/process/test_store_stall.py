"""A network that stalls between a worker and its store (issue 17): packets just stop, no reset,
no error. A TCP proxy of the test's own (tests/support/proxy.py) sits between worker A and the
store; worker B talks to the store directly.

What must hold: A's store calls end at their deadline (`?timeout=2s` here; 15 s by default)
instead of hanging, A logs the outage once and keeps running; A's job, whose lease A cannot
renew, is taken over by B once the lease ran out in the store's time, and runs again as its next
attempt; when the network comes back, A's late settlement changes nothing (JOB-05) and A
works again by itself."""

from __future__ import annotations

import os
import signal
from urllib.parse import urlsplit

import pytest
from support.processes import import_app
from support.proxy import FaultyProxy
from support.wait import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def urls(kind: str, postgres_url: str, redis_url: str, port: int) -> tuple[str, str]:
    """(through the proxy on `port`, direct) for a fresh namespace of the shared server."""
    name = f"stall_{os.urandom(4).hex()}"
    if kind == "postgres":
        direct = f"{postgres_url}?schema={name}"
    else:
        direct = f"{redis_url}?prefix={name}"
    target = urlsplit(direct)
    proxied = direct.replace(f"{target.hostname}:{target.port}", f"127.0.0.1:{port}", 1)
    return proxied + "&timeout=2s", direct


def drop_namespace(kind: str, direct: str) -> None:
    from tinyjobs.stores import open_store

    store = open_store(direct)
    try:
        if kind == "postgres":
            store._run(lambda cur, retrying: cur.execute(f"DROP SCHEMA {store.schema} CASCADE"))
        else:
            store.drop()
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_stalled_worker_times_out_and_its_job_is_taken_over_after_the_lease(
    workers, kind, postgres_url, redis_url
):
    server = urlsplit(postgres_url if kind == "postgres" else redis_url)
    with FaultyProxy((server.hostname, server.port)) as proxy:
        proxied, direct = urls(kind, postgres_url, redis_url, proxy.port)
        workers.url = proxied
        app = import_app("procapp", HERE, direct)
        try:
            a = workers.start()
            job = app.tasks["hold"].enqueue(seconds=5.0)
            wait_until(lambda: workers.marks("start"), timeout=15, what="worker A to start the job")
            assert workers.marks("start")[0]["pid"] == a.pid

            proxy.stall()
            workers.url = direct
            b = workers.start()
            # B takes the job over once its 3 s lease ran out, as attempt 2 ...
            taken = wait_until(
                lambda: [m for m in workers.marks("start") if m["pid"] == b.pid],
                timeout=20,
                what="worker B to take the job over",
            )
            assert taken[0]["job"] == job.id and taken[0]["attempt"] == 2
            # ... while A, cut off, gave up waiting for its store instead of hanging.
            lost = wait_until(
                lambda: workers.events("store.unreachable"),
                timeout=20,
                what="worker A to log that its store is unreachable",
            )
            assert [e["pid"] for e in lost] == [a.pid]
            assert a.poll() is None

            proxy.resume()
            wait_until(lambda: (j := app.get(job.id)) and j.state == "done", timeout=20, what="job done")
            wait_until(lambda: workers.events("store.reachable"), timeout=30, what="A back in touch")
            wait_until(lambda: len(workers.marks("end")) == 2, timeout=15, what="both runs to end")
            done = app.get(job.id)
            assert done.state == "done" and done.attempts == 2
            # A's settlement of attempt 1 came too late and changed nothing.
            assert [e["pid"] for e in workers.events("job.lease_lost")] == [a.pid]
            # (the store says done as B commits; B's log line follows at the end of its loop turn)
            wait_until(lambda: workers.events("job.done"), timeout=10, what="B to log job.done")
            assert [e["pid"] for e in workers.events("job.done")] == [b.pid]
            assert len(workers.events("store.unreachable")) == 1
            assert a.poll() is None
            a.send_signal(signal.SIGTERM)
            assert a.wait(15) == 0
        finally:
            workers.stop_all()
            app.close()
            drop_namespace(kind, direct)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_slow_store_slows_work_down_but_loses_no_lease(workers, kind, postgres_url, redis_url):
    """300 ms per round trip (150 ms each way): jobs that outlive their 3 s lease keep it by
    renewing, every one is done at its first attempt, and none is taken from its live holder."""
    server = urlsplit(postgres_url if kind == "postgres" else redis_url)
    with FaultyProxy((server.hostname, server.port)) as proxy:
        proxy.delay = 0.15
        proxied, direct = urls(kind, postgres_url, redis_url, proxy.port)
        workers.url = proxied
        app = import_app("procapp", HERE, direct)
        try:
            workers.start()
            jobs = [app.tasks["hold"].enqueue(seconds=4.0) for _ in range(6)]
            for job in jobs:
                wait_until(
                    lambda j=job: (s := app.get(j.id)) and s.state == "done",
                    timeout=60,
                    what=f"job {job.id} done",
                )
            assert [app.get(j.id).attempts for j in jobs] == [1] * len(jobs)
            assert len(workers.marks("start")) == len(jobs), "a job ran twice: a lease was lost"
            assert workers.events("job.lease_lost") == [] and workers.events("store.unreachable") == []
        finally:
            workers.stop_all()
            app.close()
            drop_namespace(kind, direct)
