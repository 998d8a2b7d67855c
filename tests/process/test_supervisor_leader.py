"""SUP-08: two supervisors on one store; exactly one leads (reaper, cron, purge); when the
leader is killed the other takes over once the leader lease runs out."""

from __future__ import annotations

import os
import signal
import time

import supervisor_harness
from support.wait import wait_until

harness, app = supervisor_harness.harness, supervisor_harness.app  # fixtures


def test_sup08_one_leader_per_store_and_the_other_takes_over_when_it_dies(harness):
    first = harness.start("--workers", "1", "--leader-ttl", "2s", name="first")
    second = harness.start("--workers", "1", "--leader-ttl", "2s", name="second")
    first.wait_ready(1)
    second.wait_ready(1)
    docs = wait_until(
        lambda: (d := [first.health(), second.health()]) and any(x["leader"] for x in d) and d,
        timeout=10,
        what="a leader",
    )
    assert [d["leader"] for d in docs].count(True) == 1
    leader, follower = (first, second) if docs[0]["leader"] else (second, first)
    assert leader.health()["last_reap"] is not None
    assert follower.health()["last_reap"] is None  # the follower never reaps

    os.kill(leader.pid, signal.SIGKILL)
    died_at = time.monotonic()
    took = wait_until(
        lambda: (d := follower.health())["leader"] and d["last_reap"] and d,
        timeout=15,
        what="the follower to take over",
    )
    assert time.monotonic() - died_at < 10, "about one leader TTL (2 s) after the death"
    reaped = took["last_reap"]
    wait_until(lambda: follower.health()["last_reap"] > reaped, timeout=5, what="a reap every second")
    assert follower.event("leader.elected")


def test_sup08_cron_fires_once_per_due_time_across_a_leader_change(harness):
    env = harness.env(TJ_CRON="1")
    first = harness.start("--workers", "1", "--leader-ttl", "2s", name="first", env=env)
    second = harness.start("--workers", "1", "--leader-ttl", "2s", name="second", env=env)
    first.wait_ready(1)
    second.wait_ready(1)
    wait_until(lambda: len(harness.marks_of("tick")) >= 2, timeout=20, what="two cron ticks")
    leader = first if first.health()["leader"] else second
    follower = second if leader is first else first
    os.kill(leader.pid, signal.SIGKILL)
    wait_until(lambda: follower.health()["leader"], timeout=15, what="the follower to lead")
    count = len(harness.marks_of("tick"))
    wait_until(lambda: len(harness.marks_of("tick")) >= count + 2, timeout=20, what="more ticks")
    dues = [m["due"] for m in harness.marks_of("tick")]
    assert len(dues) == len(set(dues)), "never twice for one due time"


def test_the_leaders_first_tick_waits_for_the_workers_first_reports(harness):
    # At boot the workers' first claims come first (issue 14's start-up): the leader takes its
    # lease and reaps once every worker has reported from its first turn (LEADER_WAITS_AT_MOST).
    sup = harness.start("--workers", "2")
    sup.wait_ready(2)
    elected = wait_until(lambda: sup.event("leader.elected"), timeout=10, what="the lease")[0]
    started = wait_until(lambda: len(s := sup.event("worker.started")) >= 2 and s, timeout=10, what="workers")
    assert all(s["timestamp"] <= elected["timestamp"] for s in started), (started, elected)
    assert wait_until(lambda: sup.health()["leader"], timeout=10, what="the health document to say so")
