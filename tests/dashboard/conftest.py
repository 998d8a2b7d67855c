"""Fixtures of the dashboard's tests: an App on each store with a few tasks, and jobs in
known states made by running them for real (app.drain())."""

from __future__ import annotations

import pytest
from wsgi_client import Client

import tinyjobs
from tinyjobs.dashboard import make_app

pytest.importorskip("jinja2", reason="the dashboard extra is not installed")


def build_app(store) -> tinyjobs.App:
    app = tinyjobs.App(store)
    app.queue("mail", concurrency=3, rate="10/s")

    @app.task(queue="mail", attempts=1)
    def send(run, to: str, fail: bool = False) -> dict:
        run.step("render", lambda: {"subject": f"hello {to}"})
        if fail:
            raise RuntimeError(f"mailbox of {to} is full")
        return {"sent": to}

    @app.task(queue="reports")
    def report(run, day: str) -> str:
        return day

    return app


@pytest.fixture
def app(store) -> tinyjobs.App:
    return build_app(store)


@pytest.fixture
def client(app) -> Client:
    return Client(make_app(app))
