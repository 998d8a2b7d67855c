"""examples/dashboard_flask.py, dashboard_django.py and dashboard_fastapi.py, each run as its own process and
spoken to over real HTTP: the host's login guards the dashboard, its links stay under the
mount, an action from the same origin works and one from another site is refused."""

from __future__ import annotations

import http.cookiejar
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from support.services import require_module
from support.wait import wait_until

import tinyjobs

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("framework", ["flask", "django", "fastapi"])
def test_example_mounts_the_dashboard_behind_its_login(framework: str, tmp_path) -> None:
    require_module(framework)
    if framework == "fastapi":
        require_module("a2wsgi")  # the WSGI adapter it mounts the dashboard through
    url = f"sqlite:///{tmp_path}/jobs.db"
    app = tinyjobs.App(url)
    job = app.enqueue("report", {"day": "2026-12-01"})
    port = free_port()
    env = {**os.environ, "TINYJOBS_URL": url, "ADMIN_PASSWORD": "let-me-in", "PORT": str(port)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / f"examples/dashboard_{framework}.py")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    base = f"http://127.0.0.1:{port}"
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def call(path: str, data: dict | None = None, headers: dict | None = None):
        body = None if data is None else urllib.parse.urlencode(data).encode()
        try:
            with opener.open(urllib.request.Request(base + path, body, headers or {}), timeout=10) as reply:
                return reply.status, reply.geturl(), reply.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.geturl(), err.read().decode()

    try:
        wait_until(lambda: listening(port) or proc.poll() is not None, timeout=30, what="the example server")
        assert proc.poll() is None, (tmp_path / "server.log").read_text()
        status, where, _ = call("/admin/jobs/")
        assert where.endswith("/login")  # the host's login comes first
        status, where, page = call("/login", {"password": "let-me-in"})
        assert status == 200 and where.endswith("/admin/jobs/") and "<h1>Overview</h1>" in page
        assert 'href="/admin/jobs/jobs"' in page and 'href="/admin/jobs/static/dashboard.css"' in page
        status, _, css = call("/admin/jobs/static/dashboard.css")
        assert status == 200 and "prefers-color-scheme" in css
        listing = json.loads(call("/admin/jobs/api/jobs")[2])
        assert [j["id"] for j in listing["jobs"]] == [job.id]

        cancel = f"/admin/jobs/jobs/{job.id}/cancel"
        assert call(cancel, {}, {"Origin": "http://evil.example"})[0] == 403
        assert app.get(job.id) is not None
        status, where, _ = call(cancel, {}, {"Origin": base, "Sec-Fetch-Site": "same-origin"})
        assert status == 200 and "/admin/jobs/jobs?done=cancel" in where
        assert app.get(job.id) is None
    finally:
        proc.terminate()
        proc.wait(15)
        app.close()
