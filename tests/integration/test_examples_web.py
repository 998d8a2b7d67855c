"""The framework examples under examples/web, each served by its real server and exercised
with real HTTP requests: the job exists exactly when the request's transaction commits."""

from __future__ import annotations

import secrets

import psycopg
import pytest
from psycopg import sql
from support.servers import free_port
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
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
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
