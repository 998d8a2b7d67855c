"""PostgreSQL's settle_and_claim sends its settlement two ways: in one round trip, with the
dependents' statements for every settled job sent blindly (settle.send_whole, when the last
claim found fewer jobs than it asked for), or in two, the follow-up chosen from the settle's
rows (a drain). Both must unblock the dependents of a done job, cancel those of a failed one
on record (recursively), and tell which queues have jobs due again."""

from __future__ import annotations

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.rules import dependency_error

ON = {"default": QueuePolicy("default", lease=30)}


@pytest.mark.parametrize("whole", [True, False], ids=["one-round-trip", "two-round-trips"])
def test_settle_and_claim_follows_up_dependents_both_ways(postgres_store, whole):
    store = postgres_store
    store.enqueue([NewJob(id="ok", task="t"), NewJob(id="bad", task="t")])
    store.enqueue([NewJob(id="after_ok", task="t", after=("ok",))])
    store.enqueue([NewJob(id="after_bad", task="t", after=("bad",))])
    store.enqueue([NewJob(id="after_after_bad", task="t", after=("after_bad",))])
    holder = Holder.current()
    claimed = {c.job.id: c for c in store.claim(ON, holder, 8)}
    assert set(claimed) == {"ok", "bad"}
    ended = [
        Settlement("ok", claimed["ok"].token, "done", result="1"),
        Settlement("bad", claimed["bad"].token, "fail", error="boom"),
        Settlement("bad", "not-its-token", "done", result="2"),  # refused: the lease is not its
    ]
    store._dry = whole
    applied, again = store.settle_and_claim(ended, ON, holder, 1)
    assert applied == [True, True, False]
    # The unblocked dependent is due at once. In one round trip the claim, sent after the
    # follow-up, takes it in the same transaction; in two it was sent before (the next takes it).
    assert [c.job.id for c in again] == (["after_ok"] if whole else [])
    assert store.get("after_ok").state == ("running" if whole else "waiting")
    assert store.get("after_bad").state == "cancelled"
    assert store.get("after_bad").error == dependency_error("bad", "failed")
    assert store.get("after_after_bad").error == dependency_error("after_bad", "cancelled")
