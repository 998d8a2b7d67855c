"""The Redis store beyond the contract suite: key layout, scripts, clock, refusals, wake-ups,
fork safety and memory."""

from __future__ import annotations

import multiprocessing
import secrets
import threading
import time

import pytest
import redis
from redis.crc import key_slot
from support.wait import wait_until

from tinyjobs.errors import ConfigError, NotSupported, StoreUnavailable
from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.redis import open as open_redis
from tinyjobs.stores.redis import scripts
from tinyjobs.urls import with_query

T0 = 1_700_000_000.0
QUEUES = {"default": QueuePolicy("default", lease=30.0)}


def raw(store) -> redis.Redis:
    return redis.Redis.from_url(store.url.split("?", 1)[0], decode_responses=True)


def keys_of(store) -> list[str]:
    return sorted(raw(store).scan_iter(match=store.base + ":*", count=1000))


def run_everything(store, now: float) -> None:
    """Jobs through every path: done, failed, cancelled on record, steps, keys, groups, rates,
    dependencies, a cron, a leadership lease."""
    limited = {
        "default": QueuePolicy("default", rate=(100, 60.0), group_rate=(100, 60.0)),
        "other": QueuePolicy("other", group_concurrency=2),
    }
    store.enqueue(
        [
            NewJob("a", "work", key="k", group="g1"),
            NewJob("b", "work", queue="other", group="g2", max_attempts=1),
            NewJob("c", "work", after=("b",)),
            NewJob("d", "work", delay=5),
        ],
        now=now,
    )
    claimed = store.claim(limited, Holder("h/boot", 1, 1), 10, now=now)
    assert {c.job.id for c in claimed} == {"a", "b"}
    for c in claimed:
        assert store.save_step(c.token, "s", "1", now=now)
    store.settle(
        [
            Settlement("a", claimed[0].token if claimed[0].job.id == "a" else claimed[1].token, "done"),
            Settlement(
                "b", claimed[1].token if claimed[1].job.id == "b" else claimed[0].token, "fail", error="x"
            ),
        ],
        now=now + 1,
    )
    [d] = store.claim(QUEUES, Holder("h/boot", 2, 1), 10, now=now + 6)
    store.end_leases([Holder("h/boot", 2, 1)], now=now + 7)
    store.cancel("d", now=now + 7)
    assert store.fire_cron("every", now, NewJob("cron-1", "tick"), now=now)
    [cron] = store.claim(QUEUES, Holder("h/boot", 3, 1), 10, now=now + 8)
    store.settle([Settlement("cron-1", cron.token, "done", result="1")], now=now + 8)


def test_every_key_is_in_one_hash_slot_and_nothing_is_left_after_purge(redis_store):
    run_everything(redis_store, T0)
    found = keys_of(redis_store)
    assert found, "the run wrote no keys"
    assert {key_slot(k.encode()) for k in found} == {key_slot(redis_store.base.encode())}
    assert all(k.startswith(redis_store.base + ":") for k in found)
    assert redis_store.purge(now=T0 + 400 * 86400) == 4  # a, b, c (cancelled on record), cron-1
    assert redis_store.counts(now=T0) == {}
    # Left: the cron's last due time (a schedule's state, not a job's) and the windows of recent
    # starts for rates, which expire by themselves one period (+1 s) after the last start.
    client = raw(redis_store)
    left = [k for k in keys_of(redis_store) if k != redis_store.base + ":cron"]
    assert all(":starts" in k or ":gs:" in k for k in left), left
    assert all(0 < client.ttl(k) <= 61 for k in left)


def test_scripts_are_loaded_again_after_script_flush(redis_store):
    redis_store.enqueue([NewJob("a", "work")], now=T0)
    raw(redis_store).script_flush()
    assert [j.id for j in redis_store.enqueue([NewJob("b", "work")], now=T0)] == ["b"]
    assert [c.job.id for c in redis_store.claim(QUEUES, Holder.current(), 5, now=T0)] == ["a", "b"]


def test_a_worker_clock_hours_off_does_not_matter(redis_store, monkeypatch):
    server_now = redis_store.now()
    assert abs(server_now - time.time()) < 5
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 5 * 3600)  # this worker is 5 h ahead
    [job] = redis_store.enqueue([NewJob("a", "work", delay=2)])
    assert abs(job.due_at - (server_now + 2)) < 5  # due by the server's clock, not ours
    assert job.state == "scheduled"
    assert redis_store.claim(QUEUES, Holder.current(), 5) == []  # not due yet for the server
    redis_store.enqueue([NewJob("b", "work")])
    [claimed] = redis_store.claim(QUEUES, Holder.current(), 1)
    assert claimed.job.id == "b"
    assert abs(claimed.job.started_at - server_now) < 5
    assert redis_store.reap() == 0  # our clock is 5 h past the lease: the server's is not
    assert redis_store.renew([claimed.token]) == {claimed.token: "ok"}


def test_conn_is_refused_with_a_clear_error(redis_store):
    with pytest.raises(NotSupported, match="no transaction shared") as caught:
        redis_store.enqueue([NewJob("a", "work")], conn=object())
    assert "PostgreSQL or SQLite" in str(caught.value)
    assert "transactions" not in redis_store.capabilities
    assert redis_store.get("a") is None


def test_bad_and_unreachable_urls(redis_url):
    with pytest.raises(ConfigError):
        open_redis("redis://127.0.0.1:6379/0?prefix=a{b}")
    with pytest.raises(ConfigError):
        open_redis("http://127.0.0.1:6379/0")
    with pytest.raises(StoreUnavailable):
        open_redis("unix:///nonexistent/redis.sock")
    with pytest.raises(StoreUnavailable) as caught:
        open_redis("redis://user:hunter2@127.0.0.1:1/0")
    assert "hunter2" not in str(caught.value) and "***" in str(caught.value)


def test_wait_wakes_at_once_on_a_new_job_and_blocks_when_idle(redis_store):
    other = open_redis(redis_store.url)
    try:
        started = time.monotonic()
        assert redis_store.wait(["default"], 0.3) is False
        assert time.monotonic() - started >= 0.25
        timer = threading.Timer(0.2, lambda: other.enqueue([NewJob("a", "work")]))
        timer.start()
        started = time.monotonic()
        assert redis_store.wait(["default"], 10) is True
        assert time.monotonic() - started < 2
        timer.join()
    finally:
        other.close()


def test_wait_returns_when_a_scheduled_job_comes_due(redis_store):
    redis_store.enqueue([NewJob("a", "work", delay=0.3)])
    started = time.monotonic()
    redis_store.wait(["default"], 0.01)  # eat the wake-up of the enqueue itself
    assert redis_store.wait(["default"], 10) is True
    assert time.monotonic() - started < 2
    assert [c.job.id for c in redis_store.claim(QUEUES, Holder.current(), 1)] == ["a"]


LIMITED = {"default": QueuePolicy("default", lease=30.0, concurrency=1)}


def wake_tokens(store, queue: str = "default") -> int:
    return raw(store).llen(f"{store.base}:q:{queue}:wake")


def limited_queues(store) -> dict[str, str]:
    return raw(store).hgetall(f"{store.base}:limited")


def test_a_settlement_wakes_waiters_only_on_a_queue_with_limits(redis_store):
    """Room under a queue's limits is worth a wake-up; on an unlimited queue it is not (a worker
    with free slots claims from it on its own cycle), so a settlement there pushes no token."""
    redis_store.enqueue([NewJob(i, "work") for i in "abc"], now=T0)
    raw(redis_store).delete(f"{redis_store.base}:q:default:wake")  # the enqueue's own wake-up
    a = redis_store.claim(QUEUES, Holder("h/boot", 1, 1), 1, now=T0)[0]
    assert limited_queues(redis_store) == {}
    assert redis_store.settle([Settlement("a", a.token, "done")], now=T0) == [True]
    assert wake_tokens(redis_store) == 0
    assert redis_store.wait(["default"], 0.2) is False

    b = redis_store.claim(LIMITED, Holder("h/boot", 1, 1), 5, now=T0)[0]
    assert b.job.id == "b"  # concurrency 1: `c` waits for room
    assert limited_queues(redis_store) == {"default": "1"}
    waiter = open_redis(redis_store.url)
    woke: list[tuple[bool, float]] = []
    ids: list[str] = []

    def wait() -> None:
        # The connection the waiter will block on: its thread's own.
        ids.append(str(waiter._conn.blocking().client_id()))
        started = time.monotonic()
        woke.append((waiter.wait(["default"], 10.0), time.monotonic() - started))

    def blocked() -> bool:
        return bool(ids) and any("b" in c["flags"] for c in raw(redis_store).client_list(client_id=ids))

    thread = threading.Thread(target=wait)
    try:
        thread.start()
        wait_until(blocked, what="the waiter to block on the wake-up list")
        assert woke == []
        assert redis_store.settle([Settlement("b", b.token, "done")], now=T0) == [True]
        thread.join(5)
        assert woke and woke[0][0] is True and woke[0][1] < 2, woke
    finally:
        thread.join(10)
        waiter.close()
    assert wake_tokens(redis_store) == 0  # the waiter took the one token

    # A claim without limits unmarks the queue: its settlements wake nobody again.
    c = redis_store.claim(QUEUES, Holder("h/boot", 1, 1), 5, now=T0)[0]
    assert limited_queues(redis_store) == {}
    assert redis_store.settle([Settlement("c", c.token, "done")], now=T0) == [True]
    assert wake_tokens(redis_store) == 0


def test_a_lease_that_ends_unsettled_wakes_only_a_queue_with_limits(redis_store):
    holder = Holder("h/boot", 1, 1)
    for policies, woken in ((QUEUES, 0), (LIMITED, 1)):
        [job] = redis_store.enqueue([NewJob(f"j{woken}", "work", max_attempts=1)], now=T0)
        raw(redis_store).delete(f"{redis_store.base}:q:default:wake")
        redis_store.claim(policies, holder, 1, now=T0)
        assert redis_store.reap(now=T0 + 31) == 1  # lease expired on its only attempt: failed
        assert redis_store.get(job.id, now=T0 + 31).state == "failed"
        assert wake_tokens(redis_store) == woken


def test_purge_forgets_the_limited_marker_with_its_queue(redis_store):
    limited = {
        "default": QueuePolicy("default", rate=(10, 60.0)),
        "other": QueuePolicy("other", group_concurrency=1),
    }
    redis_store.enqueue([NewJob("a", "work"), NewJob("o", "work", queue="other")], now=T0)
    a, o = redis_store.claim(limited, Holder("h/boot", 1, 1), 5, now=T0)
    assert limited_queues(redis_store) == {"default": "1", "other": "1"}
    redis_store.settle([Settlement("o", o.token, "done")], now=T0)
    assert redis_store.purge(now=T0 + 400 * 86400) == 1  # `o`: `other` holds no job any more
    assert limited_queues(redis_store) == {"default": "1"}  # `default` holds a running job
    redis_store.settle([Settlement("a", a.token, "done")], now=T0)
    assert redis_store.purge(now=T0 + 400 * 86400) == 1
    assert limited_queues(redis_store) == {}
    assert not raw(redis_store).exists(f"{redis_store.base}:limited")


def test_a_claim_that_finds_nothing_due_reads_no_limits(redis_store):
    # claim.lua reads a queue's first page of due jobs first: with none (the worker's claim after
    # each settlement at a low rate) it reads no pause flag, no limits, and marks nothing.
    limited = {"default": QueuePolicy("default", rate=(10, 60.0), concurrency=2)}
    assert redis_store.claim(limited, Holder("h/boot", 1, 1), 5, now=T0) == []
    assert limited_queues(redis_store) == {}
    redis_store.enqueue([NewJob("a", "work")], now=T0)
    assert len(redis_store.claim(limited, Holder("h/boot", 1, 1), 5, now=T0)) == 1
    assert limited_queues(redis_store) == {"default": "1"}  # marked once it had a job to take


def test_a_store_keeps_working_on_both_sides_of_a_fork(redis_store):
    redis_store.enqueue([NewJob("a", "work"), NewJob("b", "work")])
    client_before = redis_store._conn.client()
    out = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_fork_child, args=(redis_store, out))
    child.start()
    assert out.get(timeout=20) == (["a"], True)  # the child claimed on a connection of its own
    child.join(20)
    assert redis_store._conn.client() is client_before  # the parent's connection stays its own
    assert [c.job.id for c in redis_store.claim(QUEUES, Holder.current(), 5)] == ["b"]


def _fork_child(store, out) -> None:
    inherited = store._conn._local.client  # the parent's, as the fork left it
    claimed = [c.job.id for c in store.claim(QUEUES, Holder.current(), 1)]
    out.put((claimed, store._conn.client() is not inherited))


def test_bytes_per_waiting_job(redis_store, capsys):
    # The store's own keys, each counted whole by MEMORY USAGE (SAMPLES 0: every member of a
    # sorted set or hash, with Redis's own overhead per key), so that other clients writing to
    # the same server meanwhile do not count.
    client = raw(redis_store)
    n = 20_000
    payload = '{"message_id":41}'
    for i in range(0, n, 1000):
        redis_store.enqueue(
            [NewJob(f"reply:{j}", "reply", payload=payload) for j in range(i, i + 1000)], now=T0
        )
    used = sum(
        client.memory_usage(key, samples=0) or 0 for key in client.scan_iter(match=f"{redis_store.base}*")
    )
    per_job = used / n
    row = client.memory_usage(f"{redis_store.base}:job:reply:7")
    with capsys.disabled():
        print(f"\nRedis: {per_job:.0f} bytes per waiting job (job hash alone: {row} bytes)")
    assert per_job < 1000


def test_functions_are_loaded_again_after_function_flush(redis_store):
    client = raw(redis_store)
    name = scripts.library()[0].split("name=", 1)[1].split("\n", 1)[0]
    redis_store.enqueue([NewJob("a", "work")], now=T0)
    assert redis_store._scripts.functions is not False  # Redis 7: the operations are a library
    client.function_flush()
    assert [j.id for j in redis_store.enqueue([NewJob("b", "work")], now=T0)] == ["b"]
    listed = [dict(zip(lib[::2], lib[1::2], strict=True)) for lib in client.function_list(library=name)]
    assert [lib["library_name"] for lib in listed] == [name]
    assert [c.job.id for c in redis_store.claim(QUEUES, Holder.current(), 5, now=T0)] == ["a", "b"]


@pytest.mark.parametrize(
    "refused",
    [
        "-fcall",  # FCALL refused: scripts by SHA at once
        "-function|load",  # FCALL allowed but loading refused: scripts by SHA after the first miss
    ],
)
def test_a_user_refused_functions_runs_the_scripts_by_sha(redis_store, redis_url, refused):
    client = raw(redis_store)
    user, password = f"tj-{secrets.token_hex(4)}", secrets.token_hex(16)
    client.acl_setuser(
        user,
        enabled=True,
        passwords=[f"+{password}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", refused],
    )
    try:
        client.function_flush()  # so that the library is missing for this user too
        url = redis_url.replace("redis://", f"redis://{user}:{password}@", 1)
        store = open_redis(with_query(url, prefix=redis_store.prefix))
        try:
            store.enqueue([NewJob("a", "work")], now=T0)
            assert [c.job.id for c in store.claim(QUEUES, Holder.current(), 5, now=T0)] == ["a"]
            assert store._scripts.functions is False
        finally:
            store.close()
    finally:
        client.acl_deluser(user)


def _to_old_layout(store) -> int:
    """Put the store's ended executions back in the layout before P:ended:<outcome>: one sorted
    set P:ended of '<id>\\t<n>\\t<outcome>' (as a store written by an older version holds them)."""
    r = raw(store)
    moved = 0
    for key in list(r.scan_iter(match=store.base + ":ended:*")):
        outcome = key[len(store.base + ":ended:") :]
        entries = r.zrange(key, 0, -1, withscores=True)
        r.zadd(store.base + ":ended", {f"{m}\t{outcome}": score for m, score in entries})
        r.delete(key)
        moved += len(entries)
    return moved


def test_executions_recorded_in_the_old_layout_are_counted_then_moved_on_open(redis_store, monkeypatch):
    from tinyjobs.stores.redis import store as store_module

    ids = [f"j{i}" for i in range(12)]
    redis_store.enqueue([NewJob(id=i, task="t") for i in ids], now=T0)
    claimed = redis_store.claim(QUEUES, Holder.current(), 12, now=T0)
    for n, c in enumerate(claimed):
        outcome = "fail" if n % 3 == 0 else "done"
        redis_store.settle([Settlement(c.job.id, c.token, outcome, error="x")], now=T0 + 10 * n)
    series = redis_store.finished_series(T0, 30, now=T0 + 200)
    assert sum(n for _, _, n in series) == 12
    assert _to_old_layout(redis_store) == 12
    # Read as it is, and a delete removes the job's entry from the old layout too.
    assert redis_store.finished_series(T0, 30, now=T0 + 200) == series
    assert redis_store.delete("j0", now=T0 + 200)  # failed, at T0
    assert series[:2] == [(T0, "done", 2), (T0, "failed", 1)]
    series = [series[0], *series[2:]]
    assert redis_store.finished_series(T0, 30, now=T0 + 200) == series
    # Moved chunk by chunk: cut short after one chunk, nothing is lost or counted twice.
    assert redis_store._run("upgrade", [4]) == 7
    assert redis_store.finished_series(T0, 30, now=T0 + 200) == series
    monkeypatch.setattr(store_module, "UPGRADE_CHUNK", 3)
    again = open_redis(redis_store.url)
    try:
        assert not raw(redis_store).exists(redis_store.base + ":ended")
        assert again.finished_series(T0, 30, now=T0 + 200) == series
        assert redis_store.finished_series(T0, 30, now=T0 + 200) == series
    finally:
        again.close()


def test_the_pairs_set_of_an_older_layout_is_deleted_on_open_and_stats_read_as_before(redis_store):
    # P:durkeys named the (queue, outcome) pairs with execution stats; P:dursum's fields name the
    # same pairs, which execution_stats and finished_series now read, so the set goes on open.
    redis_store.enqueue([NewJob(id=i, task="t") for i in ("a", "b")], now=T0)
    a, b = redis_store.claim(QUEUES, Holder.current(), 2, now=T0)
    redis_store.settle([Settlement("a", a.token, "done"), Settlement("b", b.token, "fail")], now=T0 + 1)
    stats = redis_store.execution_stats([0.5, 2.0], now=T0 + 1)
    pairs = [(s.queue, s.outcome, s.count) for s in stats]
    assert pairs == [("default", "done", 1), ("default", "failed", 1)]
    assert not raw(redis_store).exists(redis_store.base + ":durkeys")  # written by no script
    raw(redis_store).sadd(redis_store.base + ":durkeys", "default\tdone", "default\tfailed")
    again = open_redis(redis_store.url)
    try:
        assert not raw(redis_store).exists(redis_store.base + ":durkeys")
        assert again.execution_stats([0.5, 2.0], now=T0 + 1) == stats
    finally:
        again.close()


def test_operations_sent_straight_down_the_connection_recover_from_errors(redis_store):
    # connection.execute: FCALL without redis-py's execute_command. A reply that is an error is
    # raised and leaves the connection usable; a connection the server closed is dropped and the
    # next (safe) call connects again, as through execute_command.
    from tinyjobs.stores.redis.connection import execute

    client = redis_store._conn.client()
    with pytest.raises(redis.ResponseError, match="(?i)function not found"):
        execute(client, ["FCALL", "tinyjobs_no_such_function", 0])
    assert execute(client, ["ECHO", "still here"]) == "still here"
    redis_store.enqueue([NewJob("a", "work")], now=T0)
    own = execute(client, ["CLIENT", "ID"])
    raw(redis_store).client_kill_filter(_id=own)
    redis_store.enqueue([NewJob("b", "work")], now=T0)  # repeated on a new connection
    assert execute(client, ["CLIENT", "ID"]) != own
    assert [c.job.id for c in redis_store.claim(QUEUES, Holder.current(), 5, now=T0)] == ["a", "b"]


def test_a_token_names_its_job_and_a_lease_an_older_version_took_still_holds(redis_store):
    # A token is '<claim's base><place>-<job id>': renew and save_step read the job from it, and
    # claim writes no P:tok entry. A lease taken by an older version has a token without '-',
    # found through P:tok: it renews, saves steps and settles as before, and its entry goes then.
    r, tok = raw(redis_store), redis_store.base + ":tok"
    redis_store.enqueue([NewJob("a", "work"), NewJob("b", "work")], now=T0)
    a, b = redis_store.claim(QUEUES, Holder.current(), 2, now=T0)
    assert a.token.endswith("-a") and not r.exists(tok)
    old = secrets.token_hex(10)  # 20 hex digits, as an older claim made them
    r.hset(f"{redis_store.base}:job:b", "tk", old)
    r.hset(tok, old, "b")
    forged = a.token.rsplit("-", 1)[0] + "-b"
    assert redis_store.renew([a.token, old, forged], now=T0 + 1) == {a.token: "ok", old: "ok", forged: "lost"}
    assert redis_store.save_step(old, "s", "1", now=T0 + 1)
    assert not redis_store.save_step(forged, "s", "2", now=T0 + 1)
    assert redis_store.settle(
        [Settlement("a", a.token, "done"), Settlement("b", old, "done")], now=T0 + 2
    ) == [
        True,
        True,
    ]
    assert not r.exists(tok)
    assert redis_store.renew([a.token, old], now=T0 + 3) == {a.token: "lost", old: "lost"}


def test_a_settled_holder_stays_in_the_set_unlisted_until_purge(redis_store):
    # Settling leaves the holder in P:holders (removing it, and adding it back at the next claim,
    # cost three commands a job at a low rate): holders() lists only those that still lease a
    # job, and purge drops the others.
    r, members = raw(redis_store), redis_store.base + ":holders"
    one, two = Holder("h/boot", 1, 1), Holder("h/boot", 2, 1)
    redis_store.enqueue([NewJob("a", "work"), NewJob("b", "work")], now=T0)
    [a] = redis_store.claim(QUEUES, one, 1, now=T0)
    [b] = redis_store.claim(QUEUES, two, 1, now=T0)
    assert redis_store.holders("h/boot") == [one, two]
    assert redis_store.settle([Settlement("a", a.token, "done")], now=T0 + 1) == [True]
    assert r.smembers(members) == {one.id, two.id}
    assert redis_store.holders("h/boot") == [two]
    redis_store.purge(now=T0 + 2)
    assert r.smembers(members) == {two.id}
    assert redis_store.holders("h/boot") == [two]
    # A lease that ends unsettled takes its holder out at once, as before.
    assert redis_store.end_leases([two], now=T0 + 3) == 1
    assert not r.exists(members)
    assert b.job.id == "b"
