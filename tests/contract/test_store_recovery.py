"""Dead holders: DUR-02 (their leases end at once, as "worker lost", the attempt stays counted)."""

from __future__ import annotations

from helpers import T0, add, claim, holder, ids, settle, state

from tinyjobs.holder import host_id


def test_dur02_holders_lists_the_live_holders_of_a_host(store):
    add(store, "a", "b", "c", "d")
    one, two, elsewhere = holder(pid=101), holder(pid=202), holder(pid=303, host="other/boot")
    claim(store, 2, by=one)
    claim(store, 1, by=two)
    claim(store, 1, by=elsewhere)
    assert sorted(store.holders(host_id()), key=lambda h: h.pid) == [one, two]
    assert store.holders("other/boot") == [elsewhere]
    assert store.holders("no-such-host") == []


def test_dur02_end_leases_makes_jobs_wait_again_with_attempts_counted(store):
    add(store, "a", "b", "c", max_attempts=5)
    dead, alive = holder(pid=101), holder(pid=202)
    lost = claim(store, 2, by=dead)
    [kept] = claim(store, 1, by=alive)
    assert store.end_leases([dead], now=T0 + 3) == 2

    for job_id in ids(lost):
        job = store.get(job_id, now=T0 + 3, executions=True)
        assert (job.state, job.attempts) == ("waiting", 1)
        [execution] = job.executions
        assert (execution.outcome, execution.ended_at, execution.pid) == (
            "worker lost",
            T0 + 3,
            101,
        )
    assert state(store, kept.job.id, now=T0 + 3) == "running"
    assert store.holders(host_id()) == [alive]

    # The dead holder's late writes change nothing; its jobs run again as their next attempt.
    assert settle(store, lost[0], "done", now=T0 + 4, result="1") is False
    assert store.renew([lost[0].token, kept.token], now=T0 + 4) == {
        lost[0].token: "lost",
        kept.token: "ok",
    }
    again = claim(store, 10, now=T0 + 4, by=alive)
    assert sorted(ids(again)) == sorted(ids(lost))
    assert [c.job.attempts for c in again] == [2, 2]


def test_dur02_end_leases_at_the_last_attempt_fails_the_job(store):
    add(store, "a", max_attempts=1)
    claim(store, 1, by=holder(pid=7))
    assert store.end_leases([holder(pid=7)], now=T0 + 1) == 1
    job = store.get("a", now=T0 + 1)
    assert (job.state, job.attempts) == ("failed", 1)
    assert job.error == "worker lost on attempt 1 of 1"


def test_dur02_end_leases_ignores_a_holder_with_the_same_pid_but_another_start(store):
    add(store, "a")
    claim(store, 1, by=holder(pid=7, started=100))
    assert store.end_leases([holder(pid=7, started=200)], now=T0 + 1) == 0
    assert state(store, "a", now=T0 + 1) == "running"


def test_dur02_end_leases_of_a_cancelled_job_ends_it_cancelled(store):
    add(store, "a", max_attempts=5)
    claim(store, 1, by=holder(pid=7))
    assert store.cancel("a", now=T0 + 1)
    assert store.end_leases([holder(pid=7)], now=T0 + 2) == 1
    job = store.get("a", now=T0 + 2)
    assert (job.state, job.error) == ("cancelled", "cancelled while running")
    assert claim(store, 10, now=T0 + 3) == []
