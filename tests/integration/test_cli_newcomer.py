"""Issue 13, a newcomer's first hour: the real `tinyjobs` command (and the Python calls a
newcomer makes first) on SQLite, PostgreSQL and Redis. Each test names the item it covers."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.postgres_fixtures import drop_schema, postgres_schema_url

import tinyjobs
from tinyjobs.errors import BadArguments, ConfigError, SerializationError
from tinyjobs.holder import Holder, host_id
from tinyjobs.stores.base import QueuePolicy
from tinyjobs.urls import with_query

REPO = Path(__file__).resolve().parents[2]

APP_MODULE = """
import os
import tinyjobs

app = tinyjobs.App(os.environ["NEWCOMER_URL"])
app.queue("mail")


@app.task(queue="mail", attempts=3)
def send(run, to, subject="hi"):
    return {"to": to}


@app.task
def ok(run, x):
    return x
"""


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store_url(request, tmp_path):
    """A fresh, empty namespace on each store (the SQLite file not yet created)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store/app.db"
        return
    if request.param == "postgres":
        base = request.getfixturevalue("postgres_url")
        schema = f"t_{secrets.token_hex(6)}"
        yield postgres_schema_url(base, schema)
        drop_schema(base, schema)
        return
    url = with_query(request.getfixturevalue("redis_url"), prefix=f"test-{secrets.token_hex(6)}")
    yield url
    store = tinyjobs.App(url).store
    store.drop()
    store.close()


@pytest.fixture
def project(tmp_path, store_url):
    """A newcomer's project folder: myjobs.py (app on `store_url`), broken.py, cwd for commands."""
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "store").mkdir(exist_ok=True)
    (folder / "myjobs.py").write_text(APP_MODULE)
    (folder / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    return folder


def env_for(store_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TINYJOBS_URL"}
    if store_url:
        env["NEWCOMER_URL"] = store_url
    return env


def tj(*args: str, cwd: Path, url: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """The installed `tinyjobs` command, as a newcomer runs it."""
    return subprocess.run(
        ["tinyjobs", *args], cwd=cwd, env=env_for(url), capture_output=True, text=True, timeout=timeout
    )


def app_on(url: str) -> tinyjobs.App:
    app = tinyjobs.App(url)

    @app.task(queue="mail", attempts=3)
    def send(run, to, subject="hi"):
        return {"to": to}

    @app.task
    def ok(run, x):
        return x

    app.queue("mail")
    return app


# -- wrong answers ------------------------------------------------------------------------------


def test_item02_read_commands_use_the_apps_store_and_create_no_file(project, store_url):
    app = app_on(store_url)
    job = app.enqueue("ok", {"x": 1})
    listed = tj("jobs", "--app", "myjobs:app", "--json", cwd=project, url=store_url)
    assert listed.returncode == 0, listed.stderr
    assert [j["id"] for j in json.loads(listed.stdout)] == [job.id]
    shown = tj("job", job.id, "--app", "myjobs:app", cwd=project, url=store_url)
    assert shown.returncode == 0 and job.id in shown.stdout
    # Without --app, --url or $TINYJOBS_URL: the default file, which is not there and stays so.
    bare = tj("jobs", cwd=project)
    assert bare.returncode == 2
    assert "nothing at sqlite:///tinyjobs.db" in bare.stderr and "does not exist" in bare.stderr
    assert not (project / "tinyjobs.db").exists()
    app.close()


def test_item02_a_missing_sqlite_file_is_named_and_not_created(tmp_path):
    url = f"sqlite:///{tmp_path}/absent.db"
    for args in (["jobs"], ["job", "x"], ["watch", "x"], ["cancel", "x"], ["retry", "x"]):
        result = tj("--url", url, *args, cwd=tmp_path)
        assert result.returncode == 2 and f"nothing at {url}" in result.stderr, (args, result.stderr)
    assert not (tmp_path / "absent.db").exists()


def test_item02_a_missing_postgres_schema_is_named_and_not_created(tmp_path, postgres_url):
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    url = postgres_schema_url(postgres_url, schema)
    result = tj("--url", url, "jobs", cwd=tmp_path)
    assert result.returncode == 2 and f"the schema '{schema}' holds no tinyjobs store" in result.stderr
    with psycopg.connect(postgres_url) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchall()
    assert found == [], "reading created nothing"


def test_item03_masking_leaves_the_message_readable(tmp_path, redis_url, postgres_url):
    spaced = with_query(redis_url, prefix="a b").replace("a+b", "a b")
    result = tj("--url", spaced, "jobs", cwd=tmp_path)
    assert result.returncode == 2
    assert "prefix 'a b' must be" in result.stderr and "%27" not in result.stderr and "+" not in result.stderr
    pg = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@") + "?schema=a-b"
    result = tj("--url", pg, "jobs", cwd=tmp_path)
    assert result.returncode == 2 and "schema 'a-b' must be" in result.stderr
    assert "s3cret" not in result.stderr and "postgres:***@" in result.stderr and "%" not in result.stderr


def test_item04_a_redis_database_out_of_range_or_not_a_number_is_one_line_exit_2(tmp_path, redis_url):
    base = redis_url.rsplit("/", 1)[0]
    for path, expected in (("99", "the server has no database 99"), ("notadb", "must be a number")):
        for args in (["jobs"], ["check"]):
            url = f"{base}/{path}"
            result = tj(*(["check", url] if args == ["check"] else ["--url", url, *args]), cwd=tmp_path)
            assert result.returncode == 2, result.stderr
            assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr
            assert len(result.stderr.strip().splitlines()) == 1


def test_item05_durations_past_what_a_datetime_holds_are_refused(project, store_url):
    for delay in ("100000000000w", "1000000w"):
        result = tj("--url", store_url, "enqueue", "ok", '{"x": 1}', "--delay", delay, cwd=project)
        assert result.returncode == 2 and "9999" in result.stderr, result.stderr
    app = app_on(store_url)
    with pytest.raises(ConfigError, match="9999"):
        app.enqueue("ok", {"x": 1}, delay=timedelta(days=4_000_000))
    assert app.jobs() == []
    listed = tj("--url", store_url, "jobs", "--json", cwd=project)
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    app.close()


def test_item06_one_meaning_per_json_key(project, store_url):
    added = tj("--url", store_url, "enqueue", "ok", '{"x": 1}', "--json", cwd=project)
    assert added.returncode == 0, added.stderr
    data = json.loads(added.stdout)
    assert data["created"] is True and datetime.fromisoformat(data["created_at"])
    for args in (["job", data["id"], "--json"], ["jobs", "--json"]):
        out = json.loads(tj("--url", store_url, *args, cwd=project).stdout)
        job = out[0] if isinstance(out, list) else out
        assert "created" not in job and job["created_at"] == data["created_at"]
        assert {"due_at", "started_at", "finished_at", "cancel_requested"} <= set(job)
    again = tj("--url", store_url, "enqueue", "ok", '{"x": 1}', "--id", data["id"], "--json", cwd=project)
    assert json.loads(again.stdout)["created"] is False


def test_item07_arguments_that_do_not_fit_the_handler_are_refused_at_enqueue(project, store_url):
    app = app_on(store_url)
    with pytest.raises(BadArguments, match="missing argument 'x'"):
        app.tasks["ok"].enqueue()
    with pytest.raises(BadArguments, match="unexpected argument 'too' \\(did you mean 'to'\\?\\)"):
        app.tasks["send"].enqueue(too="ann@example.com")
    with pytest.raises(BadArguments):
        app.enqueue_many([("ok", {"x": 1}), ("ok", {})])
    assert app.jobs() == [], "nothing was written"
    assert app.tasks["send"].enqueue(to="ann@example.com").created
    result = tj("enqueue", "ok", "{}", "--app", "myjobs:app", cwd=project, url=store_url)
    assert result.returncode == 2 and "missing argument 'x'" in result.stderr
    app.close()


@pytest.mark.parametrize("command", [["worker"], ["enqueue", "ok", "{}"], ["cron"]])
def test_item08_an_app_that_raises_on_import_is_one_line_and_exit_2(project, command):
    result = tj(*command, "--app", "broken:app", cwd=project)
    assert result.returncode == 2, result.stderr
    assert "cannot import 'broken': RuntimeError: boom at import" in result.stderr
    assert "Traceback" not in result.stderr and "broken.py:1" in result.stderr
    verbose = tj("--verbose", *command, "--app", "broken:app", cwd=project)
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr


# -- misleading ------------------------------------------------------------------------------------


def test_item09_enqueue_without_app_says_what_it_did_not_check(project, store_url):
    result = tj("--url", store_url, "enqueue", "send", '{"to": "a"}', cwd=project)
    assert result.returncode == 0
    assert "without --app" in result.stderr and "'default'" in result.stderr and "20" in result.stderr
    declared = tj("enqueue", "send", '{"to": "a"}', "--app", "myjobs:app", cwd=project, url=store_url)
    assert declared.returncode == 0 and "on mail" in declared.stdout and not declared.stderr
    unknown = tj("enqueue", "nosuch", "{}", "--app", "myjobs:app", cwd=project, url=store_url)
    assert unknown.returncode == 2 and "no task named 'nosuch'" in unknown.stderr


def test_item10_an_unknown_queue_is_refused_or_warned(project, store_url):
    result = tj(
        "enqueue", "ok", '{"x": 1}', "--queue", "nosuch", "--app", "myjobs:app", cwd=project, url=store_url
    )
    assert result.returncode == 2 and "no queue 'nosuch'" in result.stderr
    proc = subprocess.Popen(
        ["tinyjobs", "worker", "--app", "myjobs:app", "--queues", "nosuch"],
        cwd=project,
        env=env_for(store_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()  # the warning comes before the worker starts
        assert "warning: no task of the app uses queue(s) nosuch" in line
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_item11_cancel_of_a_running_job_says_what_will_happen(project, store_url):
    app = app_on(store_url)
    job = app.enqueue("ok", {"x": 1})
    claimed = app.store.claim({"default": QueuePolicy("default")}, Holder(host_id(), 1, 1), 1)
    assert [c.job.id for c in claimed] == [job.id]
    result = tj("--url", store_url, "cancel", job.id, cwd=project)
    assert result.returncode == 0
    assert "cancellation requested" in result.stdout and "ends done if that attempt succeeds" in result.stdout
    shown = json.loads(tj("--url", store_url, "job", job.id, "--json", cwd=project).stdout)
    assert shown["cancel_requested"] is True and shown["state"] == "running"
    assert "cancel_requested True" in tj("--url", store_url, "job", job.id, cwd=project).stdout
    waiting = app.enqueue("ok", {"x": 2})
    removed = tj("--url", store_url, "cancel", waiting.id, cwd=project)
    assert removed.returncode == 0 and "removed" in removed.stdout
    app.close()


def test_item12_a_postgres_connection_error_keeps_its_reason(tmp_path):
    result = tj("--url", "postgresql://postgres@127.0.0.1:1/test", "jobs", cwd=tmp_path)
    assert result.returncode == 2
    assert "port 1 failed: Connection refused" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_item13_a_missing_attribute_is_named(project):
    result = tj("worker", "--app", "myjobs:nosuchattr", cwd=project, url="sqlite:///x.db")
    assert result.returncode == 2 and "module 'myjobs' has no attribute 'nosuchattr'" in result.stderr
    result = tj("worker", "--app", "myjobs:os", cwd=project, url="sqlite:///x.db")
    assert result.returncode == 2 and "is a module, not a tinyjobs.App" in result.stderr


def test_item17_jobs_lists_newest_first_says_how_many_and_pages(project, store_url):
    app = app_on(store_url)
    made = [app.enqueue("ok", {"x": i}).id for i in range(3)]
    result = tj("--url", store_url, "jobs", "--limit", "2", cwd=project)
    assert result.returncode == 0
    rows = [line.split()[0] for line in result.stdout.splitlines()[1:-1]]
    assert rows == [made[2], made[1]]
    assert "showing 2 of 3 (newest first); more with --offset 2" in result.stdout
    page = json.loads(tj("--url", store_url, "jobs", "--offset", "2", "--json", cwd=project).stdout)
    assert [j["id"] for j in page] == [made[0]]
    oldest = json.loads(tj("--url", store_url, "jobs", "--oldest", "--all", "--json", cwd=project).stdout)
    assert [j["id"] for j in oldest] == made
    app.close()


def test_item18_watch_says_why_it_ends_and_shows_the_result(project, store_url):
    app = app_on(store_url)
    job = app.enqueue("ok", {"x": 7})
    timed_out = tj("--url", store_url, "watch", job.id, "--timeout", "1s", cwd=project)
    assert (
        timed_out.returncode == 1 and f"timed out after 1s: job {job.id} is still waiting" in timed_out.stderr
    )
    claimed = app.store.claim({"default": QueuePolicy("default")}, Holder(host_id(), 1, 1), 1)
    from tinyjobs.stores.base import Settlement

    app.store.settle([Settlement(job.id, claimed[0].token, "done", result="7")])
    done = tj("--url", store_url, "watch", job.id, "--timeout", "5s", cwd=project)
    assert done.returncode == 0 and "result: 7" in done.stdout, done.stdout + done.stderr
    assert "Exit status: 0 the job is done, 1" in tj("watch", "--help", cwd=project).stdout
    app.close()


def test_item19_memory_is_refused_by_one_shot_commands(tmp_path):
    for args in (["enqueue", "ok", "{}"], ["jobs"], ["migrate"]):
        result = tj("--url", "memory://", *args, cwd=tmp_path)
        assert result.returncode == 2 and "in-memory store lives in one process" in result.stderr, args


def test_every_command_documents_its_exit_status(tmp_path):
    commands = ("enqueue", "jobs", "job", "watch", "cancel", "retry", "worker", "cron", "migrate")
    for command in (*commands, "check", "verify", "supervise"):
        shown = tj(command, "--help", cwd=tmp_path).stdout
        assert "Exit status" in shown.replace("\n", " "), command


# -- friction ------------------------------------------------------------------------------------


def test_item20_timedelta_and_aware_datetime_are_accepted_everywhere():
    app = tinyjobs.App("memory://")
    app.queue("slow", timeout=timedelta(seconds=5), lease=timedelta(minutes=1))
    assert app.queues["slow"].timeout == 5 and app.queues["slow"].policy.lease == 60

    @app.task(keep=timedelta(days=2), dedupe=timedelta(hours=1))
    def nap(run, until=None):
        if until:
            return run.snooze(datetime.fromisoformat(until))
        return run.retry(timedelta(hours=2))

    assert nap.keep == 2 * 86400 and nap.dedupe == 3600
    before = time.time()
    job = nap.enqueue(delay=timedelta(minutes=5))
    assert before + 299 <= app.get(job.id).due_at <= time.time() + 301
    at = datetime.now(UTC) + timedelta(hours=3)
    assert abs(nap.enqueue(at=at).due_at - at.timestamp()) < 0.01
    now_job = nap.enqueue()
    assert app.drain() >= 1
    assert app.get(now_job.id).due_at >= before + 7199
    until = datetime.now(UTC) + timedelta(hours=5)
    snoozed = nap.enqueue(until=until.isoformat())
    app.drain()
    assert abs(app.get(snoozed.id).due_at - until.timestamp()) < 2


def test_item21_a_cron_handler_that_cannot_take_the_call_is_refused_at_decoration():
    app = tinyjobs.App("memory://")
    with pytest.raises(ConfigError, match="calls sweep\\(run\\) with no other arguments"):

        @app.cron("*/5 * * * *")
        def sweep(run, region):
            pass

    @app.cron("*/5 * * * *")
    def tidy(run, region="eu"):
        pass

    assert "tidy" in app.crons and "sweep" not in app.tasks


def test_item22_the_unit_names_nothing_pip_does_not_install_and_its_user_is_created():
    unit = (REPO / "systemd" / "tinyjobs.service").read_text()
    assert "file:///usr/share/doc" not in unit
    users = (REPO / "systemd" / "tinyjobs.sysusers.conf").read_text()
    declared = {line.split()[1] for line in users.splitlines() if line.startswith("u ")}
    wanted = {
        line.split("=", 1)[1].strip() for line in unit.splitlines() if line.startswith(("User=", "Group="))
    }
    assert wanted <= declared, "sysusers.d creates the user (and its group) the unit runs as"
    assert "useradd --system" in unit


def test_item23_error_wording():
    from tinyjobs.serialization import dump_args

    with pytest.raises(SerializationError, match="an object is not JSON"):
        dump_args({"x": object()})
    with pytest.raises(SerializationError, match="key 1 is an int"):
        dump_args({"x": {1: "a"}})
    cited = subprocess.run(
        ["git", "grep", "-n", "notes/", "--", "tinyjobs", "supervisor", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert [line for line in cited.stdout.splitlines() if "test_cli_newcomer" not in line] == []


def test_item23_check_errors_share_the_prefix(tmp_path):
    result = tj("check", "ftp://x", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("tinyjobs: ")
    usage = tj("enqueue", "t", "{}", "--at", "x", cwd=tmp_path)  # click's own usage errors too
    assert usage.returncode == 2
    assert (
        usage.stderr
        == "tinyjobs: No such option '--at'. Did you mean '--app'? (see tinyjobs enqueue --help)\n"
    )


def test_item19_a_worker_on_memory_is_refused(tmp_path):
    (tmp_path / "myjobs.py").write_text(APP_MODULE)
    done = subprocess.run(
        [sys.executable, "-m", "tinyjobs", "--url", "memory://", "worker", "--app", "myjobs:app"],
        cwd=tmp_path,
        env=env_for("memory://"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "in-memory store lives in one process" in done.stderr


def test_item16_check_on_a_fresh_sqlite_path_names_migrate_and_a_missing_folder_fails(tmp_path):
    fresh = tj("check", "sqlite:///fresh.db", "--json", cwd=tmp_path)
    database = next(f for f in json.loads(fresh.stdout)["findings"] if f["setting"] == "database")
    assert fresh.returncode == 1 and "tinyjobs migrate sqlite:///fresh.db" in database["remedy"]
    nowhere = tj("check", "sqlite:///no/such/dir/x.db", "--json", cwd=tmp_path)
    findings = json.loads(nowhere.stdout)["findings"]
    assert nowhere.returncode == 1
    assert [f["status"] for f in findings if f["setting"] == "filesystem"] in ([], ["NOT CHECKED"])
    assert not any(f["status"] == "PASS" for f in findings), findings
    assert "no such directory" in next(f["seen"] for f in findings if f["setting"] == "database")


def test_item16_check_marks_aof_items_not_applicable_when_appendonly_is_off(tmp_path):
    from support.servers import redis_server

    with redis_server(tmp_path, "--appendonly", "no") as server:
        result = tj("check", server.url, "--json", cwd=tmp_path)
    statuses = {f["setting"]: (f["status"], f["seen"]) for f in json.loads(result.stdout)["findings"]}
    assert statuses["appendonly"][0] == "FAIL"
    for name in ("appendfsync", "aof_last_write_status", "aof_last_bgrewrite_status"):
        assert statuses[name] == ("NOT CHECKED", "not applicable: appendonly is off, there is no AOF")
