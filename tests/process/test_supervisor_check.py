"""`tinyjobs check --socket` against a real supervisor (issue 13, items 1 and 22): with only the
socket it checks the supervisor and never audits (nor creates) a default SQLite file in the
current directory; a reload that failed shows as degraded, not healthy."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import supervisor_harness
from support.wait import wait_until

harness = supervisor_harness.harness  # fixture


def check(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    env = env or {k: v for k, v in os.environ.items() if k != "TINYJOBS_URL"}
    return subprocess.run(
        ["tinyjobs", "check", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_item01_check_with_only_the_socket_checks_the_supervisor(harness, tmp_path):
    sup = harness.start("--workers", "1")
    sup.wait_ready(1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = check("--socket", sup.socket_path, "--json", cwd=elsewhere)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    settings = {f["setting"]: f["status"] for f in report["findings"]}
    assert settings["supervisor.workers"] == "PASS" and settings["store"] == "NOT CHECKED"
    assert report["url"] == harness.url
    assert not (elsewhere / "tinyjobs.db").exists(), "no default store file was audited or created"
    # With a URL too, the store is audited as well.
    both = check(harness.url, "--socket", sup.socket_path, "--json", cwd=elsewhere)
    assert both.returncode == 0 and any(
        f["setting"] == "journal_mode" for f in json.loads(both.stdout)["findings"]
    )


def test_item22_a_failed_reload_is_degraded_not_healthy(harness, tmp_path):
    sup = harness.start("--workers", "1")
    sup.wait_ready(1)
    assert sup.health()["status"] == "healthy"
    (harness.dir / "broken").write_text("yes")
    sup.signal(signal.SIGHUP)
    wait_until(lambda: sup.event("supervisor.reload_failed"), timeout=10, what="the reload to fail")
    doc = sup.health()
    assert doc["healthy"] is False and doc["status"] == "degraded"
    assert doc["last_reload"]["ok"] is False and "cannot import" in doc["last_reload"]["error"]
    result = check("--socket", sup.socket_path, "--json", cwd=tmp_path)
    findings = {f["setting"]: f for f in json.loads(result.stdout)["findings"]}
    assert findings["supervisor.reload"]["status"] == "WARN" and result.returncode == 0
