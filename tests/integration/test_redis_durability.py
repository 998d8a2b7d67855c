"""A Redis with appendonly, killed and restarted under load, loses no acknowledged job.
The test starts its own redis-server on a free loopback port."""

from __future__ import annotations

import contextlib
import shutil
import signal
import threading

import pytest
from support.servers import redis_server
from support.services import missing_service
from support.wait import wait_until

from tinyjobs.errors import StoreUnavailable
from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.redis import open as open_redis

QUEUES = {"default": QueuePolicy("default", lease=2.0)}


@pytest.fixture
def server(tmp_path):
    """A redis-server with appendonly yes and appendfsync always."""
    if shutil.which("redis-server") is None:
        missing_service("redis-server")
    with redis_server(tmp_path, "--appendonly", "yes", "--appendfsync", "always") as srv:
        yield srv


def produce(store, acked: list[str], stop: threading.Event, writing: threading.Event) -> None:
    """Enqueue 3000 jobs five at a time; `writing` is set while an enqueue is outstanding."""
    n = 0
    while not stop.is_set() and n < 3000:
        ids = [f"job-{n + i}" for i in range(5)]
        writing.set()
        try:
            store.enqueue([NewJob(i, "work") for i in ids])
        except StoreUnavailable:
            continue  # not acknowledged: the same ids are tried again
        finally:
            writing.clear()
        acked.extend(ids)
        n += 5


def consume(store, done: set[str], stop: threading.Event) -> None:
    holder = Holder.current()
    while not stop.is_set():
        try:
            claimed = store.claim(QUEUES, holder, 50)
            applied = store.settle([Settlement(c.job.id, c.token, "done") for c in claimed])
        except StoreUnavailable:
            stop.wait(0.05)  # the server is down for longer than the store retries: try again
            continue
        done.update(c.job.id for c, ok in zip(claimed, applied, strict=True) if ok)
        # A settle whose reply the restart lost is retried and then reports False (its token is
        # gone from the job: the first try applied it); such a job is done all the same.
        for c, ok in zip(claimed, applied, strict=True):
            with contextlib.suppress(StoreUnavailable):
                if not ok and (job := store.get(c.job.id)) is not None and job.state == "done":
                    done.add(c.job.id)
        if not claimed:
            store.wait(["default"], 0.1)


@pytest.mark.slow
def test_a_restart_of_redis_under_load_loses_no_acknowledged_job(server):
    url = f"redis://127.0.0.1:{server.port}/0?prefix=durable"
    producer_store, consumer_store = open_redis(url), open_redis(url)
    acked: list[str] = []
    done: set[str] = set()
    stop, stop_consumer, writing = threading.Event(), threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=produce, args=(producer_store, acked, stop, writing)),
        threading.Thread(target=consume, args=(consumer_store, done, stop_consumer)),
    ]
    for t in threads:
        t.start()
    wait_until(lambda: len(acked) >= 1000, timeout=60, what="1000 acknowledged jobs")
    server.stop(signal.SIGKILL)  # no shutdown, no final save
    wait_until(writing.is_set, timeout=10, what="an enqueue outstanding while the server is down")
    server.start()
    threads[0].join(60)
    assert len(acked) == 3000

    def all_done() -> bool:
        consumer_store.reap()  # leases taken just before the kill end after 2 s
        return len(done) >= len(acked)

    with contextlib.suppress(AssertionError):  # the assertions below name what is missing
        wait_until(all_done, timeout=60, interval=0.2, what="every acknowledged job to be done")
    stop_consumer.set()
    threads[1].join(10)
    missing = [i for i in acked if producer_store.get(i) is None]
    assert missing == [], f"{len(missing)} acknowledged jobs lost, e.g. {missing[:5]}"
    assert set(acked) <= done
    assert producer_store.counts() == {"default": {"done": 3000}}
    producer_store.close()
    consumer_store.close()
