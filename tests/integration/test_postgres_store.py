"""The PostgreSQL store on a real server: durability settings, the caller's transaction, the
server's clock, dropped connections, migrations racing, schemas, fork and wake-ups."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import secrets
import threading
import time

import psycopg
import pytest
from psycopg import sql
from support.postgres_fixtures import drop_schema, postgres_schema_url

from tinyjobs.errors import ConfigError, NotSupported, StoreUnavailable
from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import open as open_postgres
from tinyjobs.stores.postgres.sqlfiles import migrations

QUEUES = {"default": QueuePolicy("default", lease=30.0)}


@pytest.fixture
def schema_url(postgres_url):
    schema = f"t_{secrets.token_hex(6)}"
    yield postgres_schema_url(postgres_url, schema), schema
    drop_schema(postgres_url, schema)


def _setting_in_write(store, write: bool = True) -> str:
    """synchronous_commit as seen inside one of the store's own transactions."""

    def op(cur, retrying):
        cur.execute("SHOW synchronous_commit")
        return cur.fetchone()[0]

    return store._conns.run(op, write=write, raise_sync=store.q["raise_sync_commit"])


@pytest.fixture
def role(postgres_url):
    """A login role of our own, dropped afterwards; yields (name, url as that role)."""
    name = f"tj_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        db = conn.info.dbname
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(db), sql.Identifier(name))
        )
    parts = postgres_url.split("://", 1)[1].split("@", 1)[-1]
    yield name, f"postgresql://{name}@{parts}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.mark.parametrize(
    ("default", "expected"), [("off", "on"), ("local", "on"), ("remote_apply", "remote_apply")]
)
def test_synchronous_commit_is_at_least_on_in_every_write(postgres_url, role, default, expected):
    name, url = role
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} SET synchronous_commit = {}").format(
                sql.Identifier(name), sql.Literal(default)
            )
        )
    schema = f"t_{secrets.token_hex(6)}"
    store = open_postgres(postgres_schema_url(url, schema))
    try:
        assert _setting_in_write(store, write=True) == expected
        # SET LOCAL: the session itself keeps its default (PgBouncer's pooling keeps this).
        assert _setting_in_write(store, write=False) == default
        store.enqueue([NewJob(id="a", task="t")])
        assert store.get("a").state == "waiting"
        # The caller's transaction is raised too, for that transaction alone.
        with psycopg.connect(url) as conn:
            store.enqueue([NewJob(id="b", task="t")], conn=conn)
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == expected
            conn.commit()
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == default
    finally:
        store.close()


def test_every_enqueue_path_writes_with_synchronous_commit_at_least_on(postgres_url, role):
    """Seen from inside the INSERT by a trigger: the single-job path (pipelined) and the batch
    path both raise a session's `off` to `on` in the enqueue's own transaction."""
    name, url = role
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} SET synchronous_commit = off").format(sql.Identifier(name)))
    schema = f"t_{secrets.token_hex(6)}"
    store = open_postgres(postgres_schema_url(url, schema))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {seen} (id text, level text);"
                    "CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "INSERT INTO {seen} VALUES (NEW.id, current_setting('synchronous_commit'));"
                    " RETURN NEW; END $$;"
                    "CREATE TRIGGER seen AFTER INSERT ON {jobs} FOR EACH ROW EXECUTE FUNCTION {fn}()"
                ).format(
                    seen=sql.Identifier(schema, "seen"),
                    fn=sql.Identifier(schema, "seen_fn"),
                    jobs=sql.Identifier(schema, "jobs"),
                )
            )
        store.enqueue([NewJob(id="one", task="t")])
        store.enqueue([NewJob(id="b1", task="t"), NewJob(id="b2", task="t")])
        with psycopg.connect(url, autocommit=True) as conn:
            seen = conn.execute(
                sql.SQL("SELECT id, level FROM {} ORDER BY id").format(sql.Identifier(schema, "seen"))
            ).fetchall()
        assert seen == [("b1", "on"), ("b2", "on"), ("one", "on")]
    finally:
        store.close()
        drop_schema(postgres_url, schema)


def test_job02_commit_and_rollback_on_the_callers_connection(postgres_store, postgres_url):
    with psycopg.connect(postgres_url) as conn:
        conn.execute("SELECT 1")  # the caller's transaction is open before the enqueue
        job = postgres_store.enqueue([NewJob(id="r", task="t")], conn=conn)[0]
        assert job.created and postgres_store.get("r") is None
        conn.rollback()
        assert postgres_store.get("r") is None
        postgres_store.enqueue([NewJob(id="c", task="t")], conn=conn)
        assert postgres_store.get("c") is None
        conn.commit()
        assert postgres_store.get("c").state == "waiting"
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # no open transaction: own one
        postgres_store.enqueue([NewJob(id="auto", task="t")], conn=conn)
    assert postgres_store.get("auto") is not None
    with pytest.raises(NotSupported, match="psycopg"):
        postgres_store.enqueue([NewJob(id="x", task="t")], conn=object())


def test_clk01_a_worker_clock_hours_off_does_not_affect_leases(postgres_store, monkeypatch):
    server = postgres_store.now()
    assert abs(server - time.time()) < 60
    skewed = time.time() + 5 * 3600
    monkeypatch.setattr(time, "time", lambda: skewed)
    postgres_store.enqueue([NewJob(id="a", task="t")])
    claimed = postgres_store.claim(QUEUES, Holder.current(), 10)
    assert [c.job.id for c in claimed] == ["a"]
    assert abs(claimed[0].job.started_at - server) < 60  # the server's time, not the worker's
    assert postgres_store.reap() == 0  # the lease runs by the server's clock
    assert postgres_store.renew([claimed[0].token]) == {claimed[0].token: "ok"}
    # A job due in 10 minutes is not due for a worker that thinks it is 5 hours later.
    postgres_store.enqueue([NewJob(id="later", task="t", delay=600)])
    assert postgres_store.claim(QUEUES, Holder.current(), 10) == []
    assert postgres_store.get("later").state == "scheduled"


def _terminate(url: str, app: str, stop: threading.Event, killed: list) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (app,),
            ).fetchall()
            killed.append(len(rows))
            stop.wait(0.05)  # a terminator every 50 ms, until told to stop


def test_terminated_backends_are_survived_and_nothing_is_lost(schema_url, postgres_url):
    url, _ = schema_url
    app = f"tj_kill_{secrets.token_hex(3)}"
    store = open_postgres(f"{url}&application_name={app}", retry_for=30)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_terminate, args=(postgres_url, app, stop, killed))
    killer.start()
    ids = [f"job-{i}" for i in range(300)]
    done: set[str] = set()
    try:
        for i in range(0, len(ids), 10):
            store.enqueue([NewJob(id=j, task="t") for j in ids[i : i + 10]])
        deadline = time.monotonic() + 60
        while len(done) < len(ids) and time.monotonic() < deadline:
            try:
                claimed = store.claim(QUEUES, Holder.current(), 20)
            except StoreUnavailable:  # a claim whose COMMIT went unanswered: leases expire
                continue
            result = store.settle([Settlement(c.job.id, c.token, "done") for c in claimed])
            done.update(c.job.id for c, ok in zip(claimed, result, strict=True) if ok)
            if not claimed:
                store.reap(now=store.now() + 3600)  # leases of unanswered claims
    finally:
        stop.set()
        killer.join()
    assert sum(killed) > 0, "the test must have terminated backends"
    assert done == set(ids)
    assert store.counts() == {"default": {"done": len(ids)}}
    store.close()


def _open_in_process(url: str, barrier: multiprocessing.synchronize.Barrier, out) -> None:
    barrier.wait()
    try:
        open_postgres(url).close()
        out.put("ok")
    except Exception as err:
        out.put(repr(err))


def test_processes_starting_together_migrate_once(schema_url, postgres_url):
    url, schema = schema_url
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_open_in_process, args=(url, barrier, out)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert sorted(out.get(timeout=5) for _ in procs) == ["ok"] * 4
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version FROM {}").format(sql.Identifier(schema, "migrations"))
        ).fetchall()
    # Each migration applied once.
    assert sorted(rows) == [(version,) for version, _ in migrations()]


def test_the_schema_option_isolates_stores(postgres_url):
    a_schema, b_schema = f"t_{secrets.token_hex(6)}", f"t_{secrets.token_hex(6)}"
    a = open_postgres(postgres_schema_url(postgres_url, a_schema))
    b = open_postgres(postgres_schema_url(postgres_url, b_schema))
    try:
        a.enqueue([NewJob(id="same", task="t", key="k")])
        assert b.get("same") is None and b.claim(QUEUES, Holder.current(), 10) == []
        assert b.enqueue([NewJob(id="same", task="t", key="k")])[0].created
        assert a.counts() == b.counts() == {"default": {"waiting": 1}}
    finally:
        a.close()
        b.close()
        drop_schema(postgres_url, a_schema)
        drop_schema(postgres_url, b_schema)


def test_no_connection_crosses_a_fork(postgres_store):
    postgres_store.enqueue([NewJob(id="parent", task="t")])
    pid = os.fork()
    if pid == 0:  # the child: its own connection, the parent's left alone
        code = 1
        try:
            postgres_store.enqueue([NewJob(id="child", task="t")])
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert postgres_store.get("child") is not None and postgres_store.get("parent") is not None


def test_wait_wakes_on_enqueue_from_another_connection(postgres_store, schema_url):
    other = open_postgres(postgres_store.settings.url)
    try:
        assert postgres_store.wait(["default"], 0.2) is False
        timer = threading.Timer(0.2, lambda: other.enqueue([NewJob(id="n", task="t")]))
        started = time.monotonic()
        timer.start()
        assert postgres_store.wait(["default"], 10) is True
        assert time.monotonic() - started < 5
        timer.join()
    finally:
        other.close()


def test_wait_wakes_on_an_async_batch_enqueue(postgres_store):
    """The async store's batch path wakes the waiters of its queues after the commit (its
    wake-up is one statement of its own), as the sync store's does."""
    other = open_postgres(postgres_store.settings.url)
    try:
        assert postgres_store.wait(["batch"], 0.2) is False

        async def later() -> None:
            await asyncio.sleep(0.2)
            astore = other.aio()
            await astore.enqueue([NewJob(id=f"b{i}", task="t", queue="batch") for i in range(3)])
            await astore.aclose()

        thread = threading.Thread(target=asyncio.run, args=(later(),))
        started = time.monotonic()
        thread.start()
        # A wait that misses the wake-up polls until its timeout (10 s): 5 s tells them apart.
        assert postgres_store.wait(["batch"], 10) is True
        assert time.monotonic() - started < 5
        thread.join()
    finally:
        other.close()


def test_a_due_time_passed_ends_one_wait_not_every_wait(postgres_store):
    """A scheduled job's due time ends the wait it falls due in; the waits after it (the claim
    that followed took the job, or could not) block for news again. Reported again, the passed
    due time ended every wait at once until the store read the due times anew: a watcher
    spinning hundreds of times a second, its claims queued ahead of the next job's start."""
    other = open_postgres(postgres_store.settings.url)
    try:
        other.enqueue([NewJob(id="soon", task="t", delay=0.15)])
        due = time.monotonic() + 0.15
        deadline = due + 5
        while time.monotonic() < due + 0.01:  # its notification, its due time: whatever ends them
            postgres_store.wait(["default"], 0.5)
            assert time.monotonic() < deadline
        started = time.monotonic()  # past due, and no claim takes it here
        assert postgres_store.wait(["default"], 0.3) is False
        assert time.monotonic() - started >= 0.25
    finally:
        other.close()


@pytest.mark.parametrize("how", ["keyword", "url"])
def test_wait_polls_without_listen(postgres_store, how):
    url = postgres_store.settings.url
    if how == "url":  # PgBouncer in transaction mode: say it in the URL
        store = open_postgres(url + ("&" if "?" in url else "?") + "listen=off")
    else:
        store = open_postgres(url, listen=False)
    assert store.listen is False
    try:
        started = time.monotonic()
        store.wait(["default"], 2)
        assert time.monotonic() - started < 1.5  # polls: wakes within the poll interval
    finally:
        store.close()


def test_bad_urls_and_unreachable_servers():
    with pytest.raises(ConfigError):
        open_postgres("postgresql://u:secret@127.0.0.1:notaport/db")
    with pytest.raises(ConfigError):
        open_postgres("postgresql://127.0.0.1/db?schema=bad-name")
    with pytest.raises(ConfigError, match="listen"):
        open_postgres("postgresql://127.0.0.1/db?listen=maybe")
    with pytest.raises(StoreUnavailable) as err:
        open_postgres("postgresql://u:secret@127.0.0.1:1/db?connect_timeout=1")
    assert "secret" not in str(err.value) and "***" in str(err.value)
