"""`tinyjobs dashboard` and `tinyjobs metrics` as real processes, on every store that several
processes can share."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from served import Served, http

import tinyjobs


@pytest.fixture
def url(store) -> str:
    if store.url.startswith("memory:"):
        pytest.skip("memory:// lives in one process")
    return store.url


def test_dashboard_serves_the_store_and_stops_on_sigterm(url) -> None:
    app = tinyjobs.App(url)
    job = app.enqueue("report", {"day": "2026-01-01"})
    served = Served("--url", url, "dashboard", "--port", "0")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", served.address), served.address
        status, headers, body = http(served.address + "api/jobs")
        assert status == 200 and [j["id"] for j in json.loads(body)["jobs"]] == [job.id]
        assert "script-src 'self'" in headers["content-security-policy"]
        status, _, _ = http(served.address + f"jobs/{job.id}/cancel", b"", {"Origin": "http://evil.example"})
        assert status == 403 and app.get(job.id) is not None
        status, _, _ = http(served.address + f"jobs/{job.id}/cancel", b"", {"Origin": served.address[:-1]})
        assert status == 200 and app.get(job.id) is None  # 303 followed to the jobs page
    finally:
        assert served.stop(signal.SIGTERM) == 0
        app.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(served.address, timeout=2)


def made(tmp_path) -> str:
    """A SQLite store that exists (reading commands never create one)."""
    url = f"sqlite:///{tmp_path}/jobs.db"
    tinyjobs.App(url).store.close()
    return url


def test_ctrl_c_stops_it_cleanly(tmp_path) -> None:
    served = Served("--url", made(tmp_path), "dashboard", "--port", "0", "--prefix", "/ops/")
    assert served.address.endswith("/ops/")
    assert http(served.address)[0] == 200
    assert http(served.address.replace("/ops/", "/"))[0] == 404
    assert served.stop(signal.SIGINT) == 0


def test_non_loopback_host_needs_auth_or_no_auth(tmp_path) -> None:
    db = made(tmp_path)
    command = [sys.executable, "-m", "tinyjobs", "--url", db, "dashboard", "--host", "0.0.0.0", "--port", "0"]
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TINYJOBS_DASHBOARD_")}
    refused = subprocess.run(command, capture_output=True, text=True, env=env, timeout=30)
    assert refused.returncode == 2
    assert "without authentication" in refused.stderr and "TINYJOBS_DASHBOARD_USER" in refused.stderr
    assert "--no-auth" in refused.stderr and refused.stdout == ""

    half = subprocess.run(
        command, capture_output=True, text=True, timeout=30, env={**env, "TINYJOBS_DASHBOARD_USER": "ops"}
    )
    assert half.returncode == 2 and "both" in half.stderr

    open_anyway = Served("--url", db, "dashboard", "--host", "0.0.0.0", "--port", "0", "--no-auth", env=env)
    assert open_anyway.address.startswith("http://0.0.0.0:")
    port = open_anyway.address.rsplit(":", 1)[1].rstrip("/")
    assert http(f"http://127.0.0.1:{port}/api/stats")[0] == 200
    assert open_anyway.stop() == 0


def test_basic_auth_from_the_environment(tmp_path) -> None:
    import base64

    env = {"TINYJOBS_DASHBOARD_USER": "ops", "TINYJOBS_DASHBOARD_PASSWORD": "s3cret-pass"}
    served = Served("--url", made(tmp_path), "dashboard", "--host", "0.0.0.0", "--port", "0", env=env)
    try:
        port = served.address.rsplit(":", 1)[1].rstrip("/")
        base = f"http://127.0.0.1:{port}/"
        status, headers, _ = http(base)
        assert status == 401 and headers["www-authenticate"].startswith("Basic")
        good = base64.b64encode(b"ops:s3cret-pass").decode()
        bad = base64.b64encode(b"ops:guess").decode()
        assert http(base, headers={"Authorization": f"Basic {bad}"})[0] == 401
        assert http(base + "metrics", headers={"Authorization": f"Basic {good}"})[0] == 200
    finally:
        assert served.stop() == 0
    assert "s3cret-pass" not in served.address


def test_metrics_command_prints_what_metrics_serves(url) -> None:
    app = tinyjobs.App(url)
    app.enqueue("report", {"day": "d"}, queue="reports")
    app.close()
    done = subprocess.run(
        [sys.executable, "-m", "tinyjobs", "--url", url, "metrics"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    families = {f.name: f for f in text_string_to_metric_families(done.stdout)}
    jobs = {(s.labels["queue"], s.labels["state"]): s.value for s in families["tinyjobs_jobs"].samples}
    assert jobs[("reports", "waiting")] == 1


def test_memory_and_missing_stores_are_refused(tmp_path) -> None:
    missing = f"sqlite:///{tmp_path}/none.db"
    for command in (["dashboard", "--port", "0"], ["metrics"]):
        for url, says in (("memory://", "in-memory store"), (missing, "nothing at")):
            done = subprocess.run(
                [sys.executable, "-m", "tinyjobs", "--url", url, *command],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 2 and says in done.stderr, (command, url, done.stderr)
    assert not (tmp_path / "none.db").exists()
