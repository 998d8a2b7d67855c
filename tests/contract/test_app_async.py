"""The App's asyncio calls on every store: aenqueue, aenqueue_many, aget, acancel, aretry and
awatch give what the sync calls give, refuse what they refuse, and hold across event loops
and under concurrency. (The store contract cases run through the async twin as well: the
tests marked `sync_and_async`.)"""

from __future__ import annotations

import asyncio

import pytest

import tinyjobs
from tinyjobs.errors import BadArguments, ConfigError, JobNotFound, NotSupported, SerializationError


@pytest.fixture
def app(store):
    app = tinyjobs.App(store)

    @app.task(attempts=1)
    def reply(run, message_id):
        if message_id < 0:
            raise ValueError("negative")
        return {"id": message_id}

    return app


def _reply(app):
    return app.tasks["reply"]


def test_aenqueue_adds_the_job_that_aget_reads_back(app):
    async def main():
        job = await _reply(app).aenqueue(message_id=41, key="msg-41")
        again = await _reply(app).aenqueue(message_id=42, key="msg-41")
        by_name = await app.aenqueue("reply", {"message_id": 43}, id="reply:43", priority=2)
        return job, again, by_name, await app.aget(job.id), await app.aget("nope")

    job, again, by_name, read, missing = asyncio.run(main())
    assert (job.created, job.state, job.args, job.key) == (True, "waiting", {"message_id": 41}, "msg-41")
    assert (again.created, again.id) == (False, job.id)  # JOB-09 holds on the async path
    assert (by_name.id, by_name.priority, by_name.created) == ("reply:43", 2, True)
    assert (read.id, read.state, read.args, read.executions) == (job.id, "waiting", {"message_id": 41}, [])
    assert missing is None
    assert app.get(job.id).args == {"message_id": 41}  # the sync side sees what async wrote


def test_aenqueue_many_writes_all_in_order_and_nothing_when_one_is_refused(app):
    async def main():
        jobs = await _reply(app).aenqueue_many([{"message_id": i} for i in range(30)])
        with pytest.raises(SerializationError, match="argument 'message_id'"):
            await _reply(app).aenqueue_many([{"message_id": 1}, {"message_id": object()}])
        with pytest.raises(ConfigError, match="unknown enqueue option"):
            await app.aenqueue("reply", {"message_id": 1}, colour="red")
        with pytest.raises(BadArguments, match="mesage_id"):  # bound to the handler, as enqueue is
            await _reply(app).aenqueue(mesage_id=1)
        return jobs

    jobs = asyncio.run(main())
    assert [j.args["message_id"] for j in jobs] == list(range(30)) and all(j.created for j in jobs)
    assert len(app.jobs(limit=1000)) == 30
    assert app.drain() == 30


def test_acancel_and_aretry_steer_jobs_as_the_sync_calls_do(app):
    async def main():
        waiting = await _reply(app).aenqueue(message_id=1)
        failing = await _reply(app).aenqueue(message_id=-1)
        cancelled = await app.acancel(waiting.id)
        gone = await app.aget(waiting.id)
        again = await app.acancel(waiting.id)
        await asyncio.to_thread(app.drain)
        failed = await app.aget(failing.id)
        retried = await app.aretry(failing.id)
        retried_twice = await app.aretry(failing.id)
        return cancelled, gone, again, failed, retried, retried_twice, await app.aget(failing.id)

    cancelled, gone, again, failed, retried, retried_twice, after = asyncio.run(main())
    assert (cancelled, gone, again) == (True, None, False)
    assert failed.state == "failed" and "negative" in failed.error
    assert (retried, retried_twice, after.state) == (True, False, "waiting")
    assert [e.outcome for e in failed.executions] == ["error"]  # aget includes executions


def test_awatch_yields_each_change_until_a_final_state(app):
    async def main():
        job = await _reply(app).aenqueue(message_id=7)
        seen = []
        first = asyncio.Event()

        async def watch():
            async for snapshot in app.awatch(job.id, interval=0.01, timeout=20):
                seen.append(snapshot.state)
                first.set()

        watcher = asyncio.create_task(watch())
        await asyncio.wait_for(first.wait(), 20)  # it saw the waiting job before the drain
        await asyncio.to_thread(app.drain)
        await asyncio.wait_for(watcher, 20)
        cancelled = await _reply(app).aenqueue(message_id=8)
        states = []
        async for snapshot in app.awatch(cancelled.id, interval=0.01, timeout=20):
            states.append(snapshot.state)
            if snapshot.state == "waiting":
                await app.acancel(cancelled.id)
        return seen, states

    seen, states = asyncio.run(main())
    assert seen[0] == "waiting" and seen[-1] == "done"
    assert states == ["waiting", "cancelled"]  # a waiting job cancelled: one last snapshot


def test_one_app_serves_one_event_loop_after_another(app):
    """Connections belong to the loop that opened them: a second asyncio.run gets its own."""
    first = asyncio.run(_reply(app).aenqueue(message_id=1))
    second = asyncio.run(_reply(app).aenqueue(message_id=2))
    assert asyncio.run(app.aget(first.id)).id == first.id
    assert second.created and {j.id for j in app.jobs()} == {first.id, second.id}


def test_concurrent_aenqueues_of_one_key_add_one_job(app):
    """50 tasks at once over the twin's connections: the key dedupes across all of them."""

    async def main():
        return await asyncio.gather(*(_reply(app).aenqueue(message_id=i, key="same") for i in range(50)))

    jobs = asyncio.run(main())
    assert sum(j.created for j in jobs) == 1
    assert len({j.id for j in jobs}) == 1 and len(app.jobs()) == 1


def test_aenqueue_conn_is_refused_clearly_where_it_cannot_reach(app, store):
    """Redis and memory have no transaction to join; PostgreSQL's async path takes an
    AsyncConnection, not a sync one (that goes to enqueue)."""
    if "transactions" not in store.capabilities:
        with pytest.raises(NotSupported, match="transaction"):
            asyncio.run(_reply(app).aenqueue(message_id=1, conn=object()))
    elif store.url.startswith("postgres"):
        with pytest.raises(NotSupported, match="AsyncConnection"):
            asyncio.run(_reply(app).aenqueue(message_id=1, conn=object()))
    else:  # as the sync enqueue: a ConfigError naming what it takes
        with pytest.raises(ConfigError, match="sqlite3.Connection"):
            asyncio.run(_reply(app).aenqueue(message_id=1, conn=object()))
    assert app.jobs() == []


def test_a_refused_job_fails_only_its_own_caller_among_concurrent_aenqueues(app):
    """Concurrent aenqueues share batches (tinyjobs.stores.aio.Grouped): one caller's parent
    that does not exist fails that caller alone, and writes nothing of its own."""

    async def main():
        fine = [_reply(app).aenqueue(message_id=i) for i in range(20)]
        refused = _reply(app).aenqueue(message_id=99, after="no-such-job")
        return await asyncio.gather(*fine, refused, return_exceptions=True)

    results = asyncio.run(main())
    assert isinstance(results[-1], JobNotFound) and "no-such-job" in str(results[-1])
    assert all(job.created for job in results[:-1])
    assert sorted(j.args["message_id"] for j in app.jobs(limit=100)) == list(range(20))


def test_aenqueue_reconnects_after_its_connections_were_killed(app, store):
    """As the sync store: a dropped connection is retried with backoff where that is safe (an
    enqueue is, by id), and the job is added once."""
    if not store.url.startswith("postgres"):
        pytest.skip("kills PostgreSQL backends; the other stores' clients are covered by their own tests")
    import psycopg

    async def main():
        first = await _reply(app).aenqueue(message_id=1)
        twin = (await app.astore()).inner
        pool = await twin._pools.get()
        pids = [conn.info.backend_pid for conn in pool.all]
        with psycopg.connect(store.settings.url.split("?", 1)[0], autocommit=True) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        second = await _reply(app).aenqueue(message_id=2, id="after-kill")
        return first, second, pids, await app.aget("after-kill")

    first, second, pids, read = asyncio.run(main())
    assert pids and second.created and read.args == {"message_id": 2}
    assert sorted(j.id for j in app.jobs()) == sorted([first.id, "after-kill"])
