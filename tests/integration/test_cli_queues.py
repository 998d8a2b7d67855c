"""`tinyjobs pause QUEUE`, `tinyjobs resume QUEUE` and `tinyjobs delete ID` against a real
SQLite file: what they print, their exit statuses, and that the store changed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import tinyjobs
from tinyjobs.cli import main


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path}/jobs.db"


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_pause_and_resume_a_queue(url):
    app = tinyjobs.App(url)
    try:
        paused = cli("--url", url, "pause", "mail")
        assert paused.exit_code == 0 and "queue mail is now paused" in paused.output
        assert app.store.paused() == {"mail"}
        assert "was already paused" in cli("--url", url, "pause", "mail").output
        resumed = cli("--url", url, "resume", "mail")
        assert resumed.exit_code == 0 and "queue mail resumed" in resumed.output
        assert app.store.paused() == set()
        assert "was not paused" in cli("--url", url, "resume", "mail").output
    finally:
        app.close()


def test_pause_refuses_an_empty_queue_name(url):
    result = CliRunner().invoke(main, ["--url", url, "pause", ""])
    assert result.exit_code == 2 and "queue name" in result.output


def test_delete_removes_a_job_and_says_so(url):
    app = tinyjobs.App(url)
    try:
        job = app.enqueue("send_mail", {"to": "ann"}, id="mail:1")
        deleted = cli("--url", url, "delete", job.id)
        assert deleted.exit_code == 0 and "deleted mail:1" in deleted.output
        assert app.get(job.id) is None
        again = CliRunner().invoke(main, ["--url", url, "delete", job.id])
        assert again.exit_code == 1 and "no job mail:1" in again.output
    finally:
        app.close()
