"""Every page and every JSON route of the dashboard, on every store (the `store` fixture)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from wsgi_client import Client

from tinyjobs.dashboard import make_app
from tinyjobs.job import STATES, Job

JOB_KEYS = set(Job(id="x", task="t", queue="q", args={}, state="waiting").to_dict())


def fill(app) -> dict[str, list[str]]:
    """Two failed mails, one done mail, two waiting reports; ids by what happened to them."""
    failed = [app.enqueue("send", {"to": f"user{i}@example.com", "fail": True}).id for i in range(2)]
    done = [app.enqueue("send", {"to": "ok@example.com"}).id]
    app.drain(["mail"])
    waiting = [app.enqueue("report", {"day": f"2026-01-0{i + 1}"}).id for i in range(2)]
    return {"failed": failed, "done": done, "waiting": waiting}


def test_every_page_answers_html(app, client) -> None:
    ids = fill(app)
    for path in (
        "/",
        "/jobs",
        "/jobs?state=failed",
        f"/jobs/{ids['failed'][0]}",
        "/queues",
        "/workers",
        "/cron",
    ):
        reply = client.get(path)
        assert reply.status == 200, (path, reply.text[:500])
        assert reply.headers["content-type"].startswith("text/html")
    overview = client.get("/").text
    assert "Recent failures" in overview and ids["failed"][0] in overview
    assert "mailbox of user" in client.get(f"/jobs/{ids['failed'][0]}").text


def test_api_jobs_filters_by_state_queue_task_and_text(app, client) -> None:
    ids = fill(app)
    listing = client.get("/api/jobs").json()
    assert set(listing) == {"jobs", "next"}
    assert {j["id"] for j in listing["jobs"]} == {i for group in ids.values() for i in group}
    assert all(set(j) == JOB_KEYS for j in listing["jobs"])

    failed = client.get("/api/jobs?state=failed").json()["jobs"]
    assert sorted(j["id"] for j in failed) == sorted(ids["failed"])
    assert all(j["state"] == "failed" and "mailbox of" in j["error"] for j in failed)
    assert {j["id"] for j in client.get("/api/jobs?queue=reports").json()["jobs"]} == set(ids["waiting"])
    assert {j["id"] for j in client.get("/api/jobs?task=send&state=done").json()["jobs"]} == set(ids["done"])
    # Search: text in the arguments, text in the error, and an id prefix.
    assert [j["id"] for j in client.get("/api/jobs?q=2026-01-02").json()["jobs"]] == [ids["waiting"][1]]
    assert {j["id"] for j in client.get("/api/jobs?q=is+full").json()["jobs"]} == set(ids["failed"])
    prefix = ids["done"][0][:-3]
    assert ids["done"][0] in [j["id"] for j in client.get(f"/api/jobs?q={prefix}").json()["jobs"]]


def test_api_jobs_pages_newest_first_by_cursor(app, client) -> None:
    made = [app.enqueue("report", {"day": str(i)}).id for i in range(7)]
    seen, cursor = [], None
    while True:
        url = "/api/jobs?limit=3" + (f"&cursor={quote(cursor)}" if cursor else "")
        page = client.get(url).json()
        assert len(page["jobs"]) <= 3
        seen += [j["id"] for j in page["jobs"]]
        if len(seen) == 3:
            app.enqueue("report", {"day": "late"})  # a newer job must not shift the pages
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == list(reversed(made))


def test_api_job_shows_executions_steps_and_dependencies(app, client) -> None:
    first = app.enqueue("send", {"to": "a@example.com"})
    second = app.enqueue("send", {"to": "b@example.com"}, after=first)
    detail = client.get(f"/api/jobs/{first.id}").json()
    assert detail["dependents"] == [{"id": second.id, "task": "send", "state": "blocked"}]
    app.drain(["mail"])
    detail = client.get(f"/api/jobs/{first.id}").json()
    assert detail["state"] == "done" and detail["result"] == {"sent": "a@example.com"}
    assert [e["outcome"] for e in detail["executions"]] == ["done"]
    assert detail["executions"][0]["host"] and detail["executions"][0]["pid"] > 0
    assert set(detail["steps"]) == {"render"}
    later = client.get(f"/api/jobs/{second.id}").json()
    assert later["waits_on"] == [{"id": first.id, "task": "send", "state": "done"}]
    missing = client.get("/api/jobs/no-such-job")
    assert missing.status == 404 and "no-such-job" in missing.json()["error"]
    assert client.get("/jobs/no-such-job").status == 404


def test_api_stats_queues_workers_cron_shapes(app, client) -> None:
    ids = fill(app)
    stats = client.get("/api/stats").json()
    assert set(stats) == {"states", "estimated", "queues", "throughput", "recent_failures", "workers"}
    assert stats["estimated"] is False
    assert stats["states"]["failed"] == 2 and stats["states"]["done"] == 1 and stats["states"]["waiting"] == 2
    assert set(stats["states"]) == set(STATES)
    hour = stats["throughput"]["hour"]
    assert hour["step_seconds"] == 60 and len(hour["buckets"]) == 60
    finished = {}
    for bucket in hour["buckets"]:
        for outcome, n in bucket["counts"].items():
            finished[outcome] = finished.get(outcome, 0) + n
    assert finished == {"error": 2, "done": 1}
    assert len(stats["throughput"]["day"]["buckets"]) == 96
    assert sorted(j["id"] for j in stats["recent_failures"]) == sorted(ids["failed"])

    queues = {q["name"]: q for q in client.get("/api/queues").json()["queues"]}
    assert set(queues) == {"mail", "reports"}
    assert queues["mail"]["counts"]["failed"] == 2 and queues["mail"]["paused"] is False
    assert queues["mail"]["limits"]["concurrency"] == 3 and queues["mail"]["limits"]["rate"] == "10/1s"
    assert queues["reports"]["counts"]["waiting"] == 2
    assert queues["reports"]["oldest_waiting_age_seconds"] >= 0
    assert client.get("/api/workers").json() == {"workers": []}
    assert client.get("/api/cron").json() == {"schedules": []}


def test_workers_show_live_and_lost(app, client) -> None:
    from tinyjobs.stores.base import WorkerBeat

    now = app.store.now()
    app.store.beat(WorkerBeat("host-a", 101, ("mail",), 8, 3, now - 100), now=now)
    app.store.beat(WorkerBeat("host-b", 202, (), 4, 0, now - 500), now=now - 60)
    workers = {w["host"]: w for w in client.get("/api/workers").json()["workers"]}
    assert workers["host-a"]["lost"] is False and workers["host-a"]["busy"] == 3
    assert workers["host-b"]["lost"] is True
    page = client.get("/workers").text
    assert "host-a" in page and "3/8" in page and "lost" in page
    assert client.get("/api/stats").json()["workers"] == {"live": 1, "lost": 1, "slots": 8, "busy": 3}


def test_cron_page_lists_the_apps_schedules(app, client) -> None:
    @app.cron("*/5 * * * *")
    def sweep(run) -> None:
        pass

    schedules = client.get("/api/cron").json()["schedules"]
    assert [s["name"] for s in schedules] == ["sweep"] and schedules[0]["last"] is None
    assert schedules[0]["next"]
    assert "*/5 * * * *" in client.get("/cron").text


def test_actions_retry_cancel_delete_a_job(app, client) -> None:
    ids = fill(app)
    failed = ids["failed"][0]
    reply = client.post(f"/jobs/{failed}/retry", {"next": f"/jobs/{failed}"})
    assert reply.status == 303 and reply.headers["location"].startswith(f"/jobs/{failed}?done=retry")
    assert app.get(failed).state == "waiting"
    assert client.post_json(f"/jobs/{failed}/retry").status == 409  # already waiting: nothing to retry

    waiting = ids["waiting"][0]
    assert client.post_json(f"/jobs/{waiting}/cancel").json() == {
        "ok": True,
        "action": "cancel",
        "id": waiting,
    }
    assert app.get(waiting) is None  # a waiting job that the user cancels is gone

    done = ids["done"][0]
    assert client.post(f"/jobs/{done}/delete").status == 303
    assert app.get(done) is None and client.get(f"/api/jobs/{done}").status == 404


def test_bulk_on_selected_and_on_all_matching_with_confirmation(app, client) -> None:
    ids = fill(app)
    reply = client.post(
        "/jobs/bulk", [("action", "delete"), ("id", ids["waiting"][0]), ("id", ids["waiting"][1])]
    )
    assert (
        reply.status == 303
        and "done=delete" in reply.headers["location"]
        and "n=2" in reply.headers["location"]
    )
    assert all(app.get(i) is None for i in ids["waiting"])

    ask = client.post_json("/jobs/bulk", {"action": "retry", "scope": "matching", "state": "failed"}).json()
    assert ask == {"confirm": True, "action": "retry", "matching": 2, "more": False, "limit": 1000}
    assert all(app.get(i).state == "failed" for i in ids["failed"])  # counting changed nothing
    page = client.post("/jobs/bulk", {"action": "retry", "scope": "matching", "state": "failed"})
    assert page.status == 200 and "Retry 2 job(s)" in page.text
    done = client.post_json(
        "/jobs/bulk", {"action": "retry", "scope": "matching", "state": "failed", "confirm": "1"}
    ).json()
    assert done["changed"] == 1  # at most the count confirmed
    assert sorted(app.get(i).state for i in ids["failed"]) == ["failed", "waiting"]
    assert client.post("/jobs/bulk", {"action": "explode"}).status == 400


def test_pause_and_resume_a_queue(app, client) -> None:
    fill(app)
    assert client.post("/queues/reports/pause").status == 303
    assert {q["name"]: q["paused"] for q in client.get("/api/queues").json()["queues"]}["reports"] is True
    assert app.drain(["reports"]) == 0  # LIM-04: nothing of a paused queue is claimed
    assert "Resume" in client.get("/queues").text
    assert client.post_json("/queues/reports/resume").json()["ok"] is True
    assert app.drain(["reports"]) == 2


def test_bad_filters_are_refused_with_the_reason(app, client) -> None:
    reply = client.get("/api/jobs?state=lost")
    assert reply.status == 400 and "state must be one of" in reply.json()["error"]
    assert "limit must be" in client.get("/api/jobs?limit=0").json()["error"]
    assert client.get("/jobs?state=lost").status == 400
    assert client.get("/nowhere").status == 404
    assert client.request("DELETE", "/jobs").status == 405


def test_served_under_a_prefix_or_a_script_name(app) -> None:
    ids = fill(app)
    prefixed = Client(make_app(app, prefix="/ops/jobs"))
    assert prefixed.get("/").status == 404
    page = prefixed.get("/ops/jobs/").text
    assert 'href="/ops/jobs/jobs"' in page and 'href="/ops/jobs/static/dashboard.css"' in page
    assert prefixed.get("/ops/jobs/static/live.js").status == 200
    assert (
        prefixed.post(f"/ops/jobs/jobs/{ids['failed'][0]}/retry").headers["location"].startswith("/ops/jobs/")
    )
    mounted = Client(make_app(app))
    page = mounted.get("/queues", script_name="/admin/tj").text
    assert 'action="/admin/tj/queues/mail/pause"' in page


@pytest.mark.parametrize("job_id", ["a/b:c", "ünïcode id", "x%2Fy"])
def test_odd_job_ids_round_trip(app, client, job_id: str) -> None:
    app.enqueue("report", {"day": "x"}, id=job_id)
    assert client.get(f"/api/jobs/{quote(job_id, safe='')}").json()["id"] == job_id
    assert client.get("/jobs/" + quote(job_id, safe="")).status == 200
    assert client.post_json(f"/jobs/{quote(job_id, safe='')}/cancel").json()["ok"] is True


def test_estimated_counts_are_marked_as_such(app, client, monkeypatch) -> None:
    from dataclasses import replace

    fill(app)
    exact = app.store.queue_stats

    def estimated(now=None):
        return [replace(q, estimated=q.name == "mail") for q in exact(now=now)]

    monkeypatch.setattr(app.store, "queue_stats", estimated)
    stats = client.get("/api/stats").json()
    assert stats["estimated"] is True
    assert {q["name"]: q["estimated"] for q in stats["queues"]} == {"mail": True, "reports": False}
    assert "are estimated" in client.get("/").text
    assert '<span title="estimated">~</span>2' in client.get("/queues").text


def test_head_and_static_files(client) -> None:
    head = client.request("HEAD", "/api/stats")
    assert head.status == 200 and head.body == b"" and int(head.headers["content-length"]) > 0
    css = client.get("/static/dashboard.css")
    assert css.status == 200 and css.headers["content-type"].startswith("text/css")
    js = client.get("/static/live.js")
    assert js.headers["content-type"].startswith("text/javascript") and b"data-live" in js.body
    assert client.get("/static/../wsgi.py").status == 404
    assert client.get("/static/nothing.js").status == 404


def test_a_page_the_bounded_search_did_not_fill_says_so_and_goes_on(app, client, monkeypatch) -> None:
    """SQLite, PostgreSQL and Redis read a bounded window of jobs per filtered page (here made 5
    wide): a match older than the window is on a later page, and the short page says why."""
    scheme = app.store.url.split(":", 1)[0]
    if scheme == "sqlite":
        from tinyjobs.stores.sqlite import views

        monkeypatch.setattr(views, "WINDOW", 5)
    elif scheme.startswith("postgres"):
        from tinyjobs.stores.postgres import views as postgres_views

        monkeypatch.setattr(postgres_views, "WINDOW", 5)
    elif scheme == "redis":
        from tinyjobs.stores.redis import views as redis_views

        monkeypatch.setattr(redis_views, "BROWSE_BUDGET", 5)
        monkeypatch.setattr(redis_views, "BROWSE_WINDOW", 5)
    else:
        pytest.skip("memory reads until the page is full")
    old = app.enqueue("report", {"day": "needle"})
    for i in range(12):
        app.enqueue("send", {"to": f"u{i}"})
    page = client.get("/jobs?q=needle")
    assert page.status == 200 and 'id="partial"' in page.text and old.id not in page.text
    seen, cursor = [], None
    for _ in range(8):
        listing = client.get("/api/jobs?q=needle" + (f"&cursor={cursor}" if cursor else "")).json()
        seen += [j["id"] for j in listing["jobs"]]
        cursor = listing["next"]
        if cursor is None:
            break
    assert seen == [old.id] and cursor is None
