"""PostgreSQL's settle_and_claim sends its settlement three ways: for queues without limits as
m008's function `settle_claim` (the follow-up done by the function when a settled job has
dependents); for limited queues in one round trip, with the dependents' statements for every
settled job sent blindly (settle.send_whole, when the last claim found fewer jobs than it asked
for), or in two, the follow-up chosen from the settle's rows (a drain). Each must unblock the
dependents of a done job, cancel those of a failed one on record (recursively), and tell which
queues have jobs due again."""

from __future__ import annotations

import pytest

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.rules import dependency_error

ON = {"default": QueuePolicy("default", lease=30)}
LIMITED = {"default": QueuePolicy("default", lease=30, concurrency=100)}


@pytest.mark.parametrize(
    "policies, whole",
    [(ON, True), (LIMITED, True), (LIMITED, False)],
    ids=["function", "one-round-trip", "two-round-trips"],
)
def test_settle_and_claim_follows_up_dependents_every_way(postgres_store, policies, whole):
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
    applied, again = store.settle_and_claim(ended, policies, holder, 1)
    assert applied == [True, True, False]
    # The unblocked dependent is due at once. In one round trip (the function too) the claim,
    # sent after the follow-up, takes it in the same transaction; in two it was sent before (the
    # next claim takes it).
    assert [c.job.id for c in again] == (["after_ok"] if whole else [])
    assert store.get("after_ok").state == ("running" if whole else "waiting")
    assert store.get("after_bad").state == "cancelled"
    assert store.get("after_bad").error == dependency_error("bad", "failed")
    assert store.get("after_after_bad").error == dependency_error("after_bad", "cancelled")
