"""The command line against a real SQLite file: output, exit statuses, masked passwords."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

import tinyjobs
from tinyjobs.cli import main


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path}/jobs.db"


def cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_enqueue_by_name_then_list_show_cancel(url):
    added = cli("--url", url, "enqueue", "send_mail", '{"to": "ann@example.com"}', "--id", "mail:1", "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["created"] is True
    again = cli("--url", url, "enqueue", "send_mail", '{"to": "ann@example.com"}', "--id", "mail:1")
    assert "exists, nothing added" in again.output

    listed = json.loads(cli("--url", url, "jobs", "--json").stdout)
    assert [(j["id"], j["task"], j["state"], j["args"]) for j in listed] == [
        ("mail:1", "send_mail", "waiting", {"to": "ann@example.com"})
    ]
    shown = cli("--url", url, "job", "mail:1")
    assert shown.exit_code == 0 and "send_mail" in shown.output
    assert cli("--url", url, "cancel", "mail:1").exit_code == 0
    assert cli("--url", url, "job", "mail:1").exit_code == 1  # a cancelled waiting job is gone
    assert cli("--url", url, "cancel", "mail:1").exit_code == 1


def test_retry_brings_a_failed_job_back_and_watch_follows_it(url):
    app = tinyjobs.App(url)

    @app.task(attempts=1)
    def flaky(run):
        if run.attempt == 1:
            raise RuntimeError("first time")
        return "second time"

    job = flaky.enqueue()
    app.drain()
    assert app.get(job.id).state == "failed"
    assert cli("--url", url, "retry", job.id).exit_code == 0
    assert cli("--url", url, "retry", "nope").exit_code == 1
    app.drain()
    watched = cli("--url", url, "watch", job.id, "--timeout", "5s")
    assert watched.exit_code == 0 and "done" in watched.output
    assert app.get(job.id).result == "second time"


def test_bad_input_exits_2_with_a_clear_message(url):
    assert cli("--url", url, "enqueue", "t", "not json").exit_code == 2
    assert cli("--url", url, "enqueue", "t", "[1, 2]").exit_code == 2
    assert cli("--url", url, "enqueue", "t", "{}", "--delay", "soon").exit_code == 2
    result = cli("--url", url, "worker", "--app", "no_such_module:app")
    assert result.exit_code == 2 and "cannot import" in result.output
    result = cli("--url", "ftp://user:s3cret@host/x", "jobs")
    assert result.exit_code == 2 and "unknown scheme" in result.output and "s3cret" not in result.output


def test_an_unwritable_store_path_is_refused_by_name():
    result = cli("--url", "sqlite:////proc/no/such/dir/jobs.db", "jobs")
    assert result.exit_code == 2 and "/proc/no/such/dir" in result.output


def test_the_installed_command_runs_and_masks_passwords():
    done = subprocess.run(
        [sys.executable, "-m", "tinyjobs", "--url", "redis://:s3cret@127.0.0.1:1/0", "jobs"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "s3cret" not in done.stdout + done.stderr and "***" in done.stderr
