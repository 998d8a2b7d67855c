"""Django with tinyjobs, in one module (settings, view, URLs): a signup writes the user and
enqueues its welcome job inside `transaction.atomic()`, so a rolled-back request leaves no job.

    DATABASE_URL=sqlite:///site.db python -m examples.web.django_site runserver
    DATABASE_URL=postgresql://app@db/app python -m examples.web.django_site runserver
    tinyjobs --url sqlite:///site.db worker --app examples.web.django_site:jobs

When the jobs live in Django's own database (SQLite or PostgreSQL, the default here), the job
is written through Django's connection (`conn=connection.connection`), in the request's
transaction: it exists exactly when that transaction commits. When they live elsewhere (Redis,
or another database: TINYJOBS_URL), `conn=` cannot reach Django's transaction, and the job is
enqueued by `transaction.on_commit` instead: never for a rolled-back request, but a crash
between Django's commit and the enqueue loses the job (the data committed, its job not)."""

from __future__ import annotations

import os
import sys
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import django
from django.conf import settings
from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.urls import path

import tinyjobs

DATABASE_URL = os.environ.get("DATABASE_URL", "sqlite:///site.db")


def django_database(url: str) -> dict[str, Any]:
    """Django's DATABASES entry for a sqlite:/// or postgresql:// URL."""
    if url.startswith("sqlite:///"):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url[len("sqlite:///") :]}
    parts = urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": {k: v for k, v in parse_qsl(parts.query) if k == "options"},
    }


settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="example-only",
    DATABASES={"default": django_database(DATABASE_URL)},
    MIDDLEWARE=[],
)
django.setup()

# The jobs in Django's database by default (tinyjobs takes `?schema=`, Django ignores it).
jobs = tinyjobs.App(os.environ.get("TINYJOBS_URL", DATABASE_URL))
# conn= reaches Django's transaction only when the jobs are in Django's own database.
SHARED = "TINYJOBS_URL" not in os.environ


@jobs.task(queue="email")
def welcome(run: tinyjobs.Run, user_id: int) -> dict[str, int]:
    return {"welcomed": user_id}


def enqueue_with_the_transaction(task: tinyjobs.Task[Any, Any], **kwargs: Any) -> str | None:
    """Enqueue as part of the current atomic() block; the job id, or None when it goes at
    commit (on_commit: see the module's docstring for the trade-off)."""
    if SHARED:
        connection.ensure_connection()
        return task.enqueue(conn=connection.connection, **kwargs).id
    transaction.on_commit(lambda: task.enqueue(**kwargs))
    return None


class RolledBack(Exception):
    pass


def signup(request: HttpRequest) -> JsonResponse:
    name = request.GET["name"]
    try:
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("INSERT INTO users (name) VALUES (%s) RETURNING id", [name])
                user_id = cur.fetchone()[0]
            job_id = enqueue_with_the_transaction(welcome, user_id=user_id)
            if name.startswith("rollback-"):
                raise RolledBack(name)  # a failure after the enqueue: all rolled back
    except RolledBack:
        return JsonResponse({"error": "rolled back"}, status=500)
    return JsonResponse({"user_id": user_id, "job_id": job_id})


def job_status(request: HttpRequest, job_id: str) -> JsonResponse:
    job = jobs.get(job_id)
    if job is None:
        return JsonResponse({"error": "no such job"}, status=404)
    return JsonResponse({"id": job.id, "state": job.state})


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


urlpatterns = [path("signup", signup), path("jobs/<str:job_id>", job_status), path("health", health)]


def create_tables() -> None:
    key = "serial" if connection.vendor == "postgresql" else "integer"
    with connection.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS users (id {key} PRIMARY KEY, name text UNIQUE)")


if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    create_tables()
    _ = jobs.store  # open (and migrate) now: on SQLite, not inside a request's write transaction
    execute_from_command_line(sys.argv)
