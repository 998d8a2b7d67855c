"""The framework examples under examples/web, each served by its real server and exercised
with real HTTP requests: the job exists exactly when the request's transaction commits."""

from __future__ import annotations

import secrets

import psycopg
import pytest
from psycopg import sql
from support.servers import free_port
from support.services import require_module
from support.webapps import call, served

import tinyjobs


@pytest.fixture
def pg_schema(postgres_url):
    """A fresh schema for the example's tables and jobs; (database URL with it on the search
    path, tinyjobs URL naming it)."""
    schema = f"web_{secrets.token_hex(5)}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    sep = "&" if "?" in postgres_url else "?"
    yield f"{postgres_url}{sep}options=-csearch_path%3D{schema}", f"{postgres_url}{sep}schema={schema}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_fastapi_enqueues_in_the_requests_async_transaction(pg_schema, tmp_path):
    require_module("fastapi")
    require_module("uvicorn")
    database_url, jobs_url = pg_schema
    port = free_port()
    command = ["-m", "uvicorn", "examples.web.fastapi_app:api", "--port", str(port), "--log-level", "warning"]
    env = {"DATABASE_URL": database_url, "TINYJOBS_URL": jobs_url}
    with served(command, port, env, tmp_path / "server.log") as base:
        status, body = call("POST", f"{base}/signup?name=ann")
        assert status == 200, body
        status, job = call("GET", f"{base}/jobs/{body['job_id']}")
        assert (status, job["state"]) == (200, "waiting")
        status, _ = call("POST", f"{base}/signup?name=rollback-bob")
        assert status == 500
        assert call("POST", f"{base}/signup?name=ann")[0] == 409
    app = tinyjobs.App(jobs_url)

    @app.task(queue="email")
    def welcome(run, user_id):  # what the example's worker would run
        return {"welcomed": user_id}

    try:
        assert [(j.task, j.args) for j in app.jobs()] == [("welcome", {"user_id": body["user_id"]})]
        with psycopg.connect(database_url) as conn:
            names = [row[0] for row in conn.execute("SELECT name FROM users ORDER BY id")]
        assert names == ["ann"]  # bob's row and bob's job were rolled back together
        assert app.drain() == 1 and app.get(body["job_id"]).result == {"welcomed": body["user_id"]}
    finally:
        app.close()


def _django_round(base: str) -> dict:
    status, ann = call("POST", f"{base}/signup?name=ann")
    assert status == 200, ann
    assert call("POST", f"{base}/signup?name=rollback-bob")[0] == 500
    return ann


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_django_enqueues_on_its_own_connection_inside_atomic(database, request, tmp_path):
    require_module("django")
    if database == "sqlite":
        database_url = f"sqlite:///{tmp_path}/site.db"  # Django's file, and the jobs' too
    else:
        search_path_url, jobs_url = request.getfixturevalue("pg_schema")
        database_url = f"{search_path_url}&schema={jobs_url.rsplit('schema=', 1)[1]}"
    port = free_port()
    command = ["-m", "examples.web.django_site", "runserver", "--noreload", f"127.0.0.1:{port}"]
    with served(command, port, {"DATABASE_URL": database_url}, tmp_path / "server.log") as base:
        ann = _django_round(base)
        assert ann["job_id"] is not None  # written in the request's transaction
        status, job = call("GET", f"{base}/jobs/{ann['job_id']}")
        assert (status, job["state"]) == (200, "waiting")
    app = tinyjobs.App(database_url)
    try:
        assert [(j.task, j.args) for j in app.jobs()] == [("welcome", {"user_id": ann["user_id"]})]
    finally:
        app.close()


def test_django_falls_back_to_on_commit_when_the_jobs_live_elsewhere(redis_url, tmp_path):
    require_module("django")
    jobs_url = f"{redis_url}{'&' if '?' in redis_url else '?'}prefix=django-{secrets.token_hex(4)}"
    port = free_port()
    command = ["-m", "examples.web.django_site", "runserver", "--noreload", f"127.0.0.1:{port}"]
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/site.db", "TINYJOBS_URL": jobs_url}
    with served(command, port, env, tmp_path / "server.log") as base:
        ann = _django_round(base)
        assert ann["job_id"] is None  # enqueued at commit, after the view returned its id
    app = tinyjobs.App(jobs_url)
    try:
        assert [(j.task, j.args) for j in app.jobs()] == [("welcome", {"user_id": ann["user_id"]})]
    finally:
        app.store.drop()
        app.close()


def test_flask_app_factory_enqueues_from_a_view(tmp_path):
    require_module("flask")
    jobs_url = f"sqlite:///{tmp_path}/jobs.db"
    port = free_port()
    command = ["-m", "flask", "--app", "examples.web.flask_app:create_app()", "run", "--port", str(port)]
    with served(command, port, {"TINYJOBS_URL": jobs_url}, tmp_path / "server.log") as base:
        status, first = call("POST", f"{base}/orders/7")
        assert (status, first["created"], first["state"]) == (200, True, "waiting")
        status, again = call("POST", f"{base}/orders/7")
        assert (again["created"], again["job_id"]) == (False, first["job_id"])  # its key dedupes
        later = call("POST", f"{base}/orders/8?delay=10m")[1]
        assert later["state"] == "scheduled"
        assert call("GET", f"{base}/jobs/{first['job_id']}")[1]["state"] == "waiting"
        assert call("GET", f"{base}/jobs/nope")[0] == 404
    app = tinyjobs.App(jobs_url)

    @app.task(queue="email")
    def send_receipt(run, order_id):
        return {"sent": order_id}

    try:
        assert app.drain() == 1 and app.get(first["job_id"]).result == {"sent": 7}
    finally:
        app.close()
