"""browse, dependents and steps: the dashboard's listing and a job's relations, on every store."""

from __future__ import annotations

import pytest
from helpers import T0, add, claim, claim_one, new, queues, settle

from tinyjobs.errors import ConfigError
from tinyjobs.stores.base import JobFilter


def names(jobs) -> list[str]:
    return [j.id for j in jobs]


def all_pages(store, filter: JobFilter, limit: int, now: float = T0) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        jobs, cursor = store.browse(filter, cursor, limit, now=now)
        pages.append(names(jobs))
        if cursor is None:
            return pages
        assert len(pages) < 50, "browse never reached its last page"


def test_browse_lists_newest_first_by_created_then_id_in_pages(store):
    add(store, "a1", "a2", now=T0)  # one batch: same created_at, so id decides (descending)
    add(store, "b1", now=T0 + 1)
    add(store, "c1", "c2", "c3", now=T0 + 2)
    assert all_pages(store, JobFilter(), 2, now=T0 + 3) == [["c3", "c2"], ["c1", "b1"], ["a2", "a1"]]
    jobs, cursor = store.browse(JobFilter(), None, 10, now=T0 + 3)
    assert names(jobs) == ["c3", "c2", "c1", "b1", "a2", "a1"] and cursor is None
    assert jobs[0].created_at == T0 + 2 and jobs[0].args == {}


def test_browse_paging_stays_correct_while_jobs_move_and_arrive(store):
    add(store, "a", now=T0)
    add(store, "b", now=T0 + 1)
    add(store, "c", now=T0 + 2)
    add(store, "d", now=T0 + 3)
    first, cursor = store.browse(JobFilter(), None, 2, now=T0 + 4)
    assert names(first) == ["d", "c"]
    add(store, "e", now=T0 + 5)  # newer than the page: never shows on later pages
    for claimed in claim(store, 10, now=T0 + 5):  # every job changes state
        settle(store, claimed, "done", now=T0 + 6)
    rest, cursor = store.browse(JobFilter(), cursor, 2, now=T0 + 6)
    assert names(rest) == ["b", "a"] and all(j.state == "done" for j in rest) and cursor is None


def test_browse_filters_by_reported_state_queue_and_task(store):
    add(store, "w1", now=T0)
    add(store, "s1", delay=60, now=T0 + 1)
    add(store, "m1", queue="mail", task="send", now=T0 + 2)
    add(store, "f1", queue="mail", now=T0 + 3)
    failed = claim_one(store, now=T0 + 4, on=queues("mail"))
    assert failed.job.id == "m1"
    settle(store, failed, "fail", error="boom", now=T0 + 4)

    def only(**fields) -> list[str]:
        return names(store.browse(JobFilter(**fields), None, 50, now=T0 + 5)[0])

    assert only(state="waiting") == ["f1", "w1"]
    assert only(state="scheduled") == ["s1"]
    assert only(state="failed") == ["m1"]
    assert only(queue="mail") == ["f1", "m1"]
    assert only(task="send") == ["m1"]
    assert only(queue="mail", state="waiting") == ["f1"]
    assert only(queue="none") == []
    # The split between scheduled and waiting follows `now`.
    assert names(store.browse(JobFilter(state="waiting"), None, 50, now=T0 + 61)[0]) == ["f1", "s1", "w1"]


def test_browse_text_matches_id_prefix_arguments_and_error(store):
    store.enqueue([new("order-17", payload='{"email": "ann@example.com"}')], now=T0)
    store.enqueue([new("order-18", payload='{"email": "bob@example.com"}')], now=T0 + 1)
    store.enqueue([new("x-order", payload='{"note": "100%_done"}')], now=T0 + 2)
    add(store, "e1", now=T0 + 3)
    first = claim(store, 10, now=T0 + 4)
    for claimed in first:
        if claimed.job.id == "e1":
            settle(store, claimed, "fail", error="KeyError: 'zebra'", now=T0 + 4)

    def text(value: str) -> list[str]:
        return names(store.browse(JobFilter(text=value), None, 50, now=T0 + 5)[0])

    assert text("order-") == ["order-18", "order-17"]  # a prefix of the id, not a part of it
    assert text("bob@") == ["order-18"]
    assert text("zebra") == ["e1"]
    assert text("100%_") == ["x-order"]  # LIKE's wildcards are plain characters here
    assert text("%") == ["x-order"] and text("_d") == ["x-order"]
    assert text("nothing-like-it") == []


def test_browse_refuses_a_bad_state_limit_or_cursor_naming_it(store):
    with pytest.raises(ConfigError, match="state 'lost'"):
        store.browse(JobFilter(state="lost"), None, 10, now=T0)
    with pytest.raises(ConfigError, match="limit 0"):
        store.browse(JobFilter(), None, 0, now=T0)
    with pytest.raises(ConfigError, match="limit 501"):
        store.browse(JobFilter(), None, 501, now=T0)
    with pytest.raises(ConfigError, match="cursor"):
        store.browse(JobFilter(), "not-a-cursor", 10, now=T0)


def test_browse_last_full_page_has_no_next_cursor(store):
    add(store, "a", "b", now=T0)
    jobs, cursor = store.browse(JobFilter(), None, 2, now=T0)
    assert names(jobs) == ["b", "a"] and cursor is None


def test_dependents_lists_the_jobs_enqueued_after_a_job(store):
    add(store, "p", "other", now=T0)
    store.enqueue([new("c1", after=("p",)), new("c2", after=("p", "other"))], now=T0 + 1)
    store.enqueue([new("g", after=("c1",))], now=T0 + 2)
    assert names(store.dependents("p")) == ["c1", "c2"]
    assert [j.state for j in store.dependents("p")] == ["blocked", "blocked"]
    assert names(store.dependents("c1")) == ["g"]
    assert names(store.dependents("p", limit=1)) == ["c1"]
    assert store.dependents("g") == [] and store.dependents("unknown") == []


def test_steps_returns_the_kept_values(store):
    add(store, "a", now=T0)
    claimed = claim_one(store, now=T0)
    assert store.steps("a") == {}
    assert store.save_step(claimed.token, "fetch", '{"n": 1}', now=T0)
    assert store.save_step(claimed.token, "send", '"ok"', now=T0)
    assert store.steps("a") == {"fetch": '{"n": 1}', "send": '"ok"'}
    assert store.steps("unknown") == {}


def test_browse_pages_a_filtered_listing_without_skipping(store):
    for i in range(7):
        add(store, f"j{i}", queue="q" if i % 2 else "default", now=T0 + i)
    pages = all_pages(store, JobFilter(queue="q"), 2, now=T0 + 10)
    assert pages == [["j5", "j3"], ["j1"]]
