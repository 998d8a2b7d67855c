"""`tinyjobs verify`: short runs on SQLite, PostgreSQL and Redis that pass, and one test
per cause of exit 1 and exit 2. Faults are made from outside, as an operator's bad day would
make them: a job deleted from the store behind verify's back, a ledger row deleted or the ledger
replaced, a worker killed, triggers that make one enqueue or a few settlements fail, SIGINT to
verify, SIGKILL to verify. Faults inside a handler (a job failing, cancelled, never finishing)
and a worker that exits 3 on SIGTERM come from a worker module the test writes, which verify
starts in place of its own (tinyjobs.verify.fleet.WORKER_MODULE)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.wait import wait_until

import tinyjobs
from tinyjobs.cli import main
from tinyjobs.stores import open_store
from tinyjobs.verify.fleet import FleetRecord
from tinyjobs.verify.report import Sent, Tally, Verdict, failures, render
from tinyjobs.verify.settings import Refused, settings

pytestmark = pytest.mark.slow

# Two workers, 40 jobs a second for 2.5 s (100 jobs), a kill at 1 s (SIGTERM) and 2 s (SIGKILL).
# --settle bounds the wait for the last jobs (a killed worker's job waits out its lease, then
# runs again): verify ends as soon as they have, so a generous bound costs a passing run nothing
# and keeps a loaded machine from failing a run that lost nothing.
SHORT = "--duration 2.5 --rate 40 --workers 2 --slots 4 --kill-every 1 --lease 2 --settle 15".split()
LAUNCHER = (
    "import sys, tinyjobs.verify.fleet as fleet; fleet.WORKER_MODULE = sys.argv.pop(1); "
    "from tinyjobs.cli import main; main(sys.argv[1:], prog_name='tinyjobs')"
)
FAULT_WORKER = """
import os
import tinyjobs
from tinyjobs.verify import worker as verify_app
from tinyjobs.worker import Worker

MODE = os.environ["VERIFY_TEST_FAULT"]

def fault(run, n):
    if MODE == "term-exit" or n != 5:
        return None
    if MODE == "fail":
        return run.fail("injected failure")
    if MODE == "snooze":
        return run.snooze("1h")
    if MODE == "cancel":
        tinyjobs.App(os.environ["TINYJOBS_URL"]).cancel(run.id)
        raise RuntimeError("cancelled while it ran")

if MODE == "term-exit":
    Worker._on_signal = lambda self, signum, frame: os._exit(3)
verify_app.main(fault)
"""


def report_of(output: str) -> list[str]:
    """The report's lines: from `sent ...` to the end."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("sent "))
    return lines[start:]


class Verify:
    """`tinyjobs verify` in a child process, its temporary directory under the test's."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir(exist_ok=True)
        path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
        self.env = {**os.environ, "TMPDIR": str(self.tmp), "PYTHONPATH": path}
        self.proc: subprocess.Popen[str] | None = None
        self.tmp_path = tmp_path

    def start(self, url: str, *args: str, fault: str | None = None) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "tinyjobs", "verify", url, *args]
        if fault is not None:
            (self.tmp_path / "faultworker.py").write_text(FAULT_WORKER)
            self.env["VERIFY_TEST_FAULT"] = fault
            command = [sys.executable, "-c", LAUNCHER, "faultworker", "verify", url, *args]
        self.proc = subprocess.Popen(
            command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        return self.proc

    def finish(self, timeout: float = 90) -> tuple[int, list[str], str]:
        assert self.proc is not None
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, report_of(out), err

    def run(self, url: str, *args: str, fault: str | None = None) -> tuple[int, list[str], str]:
        self.start(url, *args, fault=fault)
        return self.finish()

    def ledger(self, timeout: float = 30) -> Path:
        return wait_until(
            lambda: next(self.tmp.glob("tinyjobs-verify-*/ledger.db"), None), timeout, what="verify's ledger"
        )

    def worker_store_errors(self) -> int:
        """How many store errors verify's workers have logged so far (an outage once, as
        `store.unreachable`, like tinyjobs.verify.fleet counts them)."""
        logs = self.tmp.glob("tinyjobs-verify-*/worker-*.log")
        texts = [path.read_text(errors="replace") for path in logs]
        return sum(t.count('"store.error"') + t.count('"store.unreachable"') for t in texts)

    def workers(self) -> list[int]:
        """The pids of verify's worker processes, oldest first."""
        assert self.proc is not None
        return children(self.proc.pid)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[1]) == pid and fields[0] not in "ZX":
                found.append(int(entry.name))
    return sorted(found)


@pytest.fixture
def runner(tmp_path):
    verify = Verify(tmp_path)
    yield verify
    verify.kill()


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def found_db(db: Path) -> Path:
    """A SQLite store that exists, empty, before verify runs: verify leaves it as it was found
    (a fresh file is test_a_fresh_sqlite_file_is_named_not_said_to_be_as_found)."""
    prepare_sqlite(db)
    return db


def sqlite_url(db: Path) -> str:
    return f"sqlite:///{db}"


def rows(db: Path, sql: str, *params) -> list[tuple]:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:  # no table yet
        return []
    finally:
        conn.close()


def execute(db: Path, script: str) -> None:
    conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        conn.executescript(script)
    finally:
        conn.close()


def prepare_sqlite(db: Path) -> None:
    """Create the store's schema, so that a test can put triggers on it before verify runs."""
    open_store(sqlite_url(db)).close()


def verify_jobs(db: Path) -> int:
    found = rows(db, "SELECT count(*) FROM jobs WHERE id LIKE 'verify:%'") if db.exists() else []
    return found[0][0] if found else 0


def store_jobs(url: str) -> int:
    store = open_store(url)
    try:
        return sum(sum(states.values()) for states in store.counts().values())
    finally:
        store.close()


def assert_passed(code: int, lines: list[str], err: str) -> None:
    assert code == 0, "\n".join(lines) + err
    assert re.fullmatch(
        r"sent 100 jobs: 100 succeeded, 0 failed, 0 cancelled, 0 unfinished, 0 lost", lines[0]
    )
    assert lines[1] == "workers stopped 2 times, 1 by SIGTERM and 1 by SIGKILL, 0 unexpected deaths"
    assert re.fullmatch(
        r"[\d,]+ jobs? ran more than once(, after the kills)?; every job applied its side effect once",
        lines[2],
    )
    assert re.fullmatch(r"end-to-end p50 [\d,]+ ms, p95 [\d,]+ ms, kills included", lines[3])
    assert lines[4] == "0 enqueue failures; the store is left as it was found"
    assert lines[5:] == ["ok"]


# -- runs that pass, on each store ------------------------------------------------------------


def test_verify_passes_on_sqlite_and_leaves_only_the_schema(runner, found_db):
    db = found_db
    code, lines, err = runner.run(sqlite_url(db), *SHORT)
    assert_passed(code, lines, err)
    assert rows(db, "SELECT count(*) FROM jobs")[0][0] == 0
    assert rows(db, "SELECT count(*) FROM executions")[0][0] == 0
    assert not list(runner.tmp.iterdir()), "the temporary directory of a passing run is removed"


def test_a_fresh_sqlite_file_is_named_not_said_to_be_as_found(runner, tmp_path):
    fresh = tmp_path / "fresh.db"
    code, lines, err = runner.run(sqlite_url(fresh), *SHORT)
    assert code == 0, "\n".join(lines) + err
    assert lines[4] == (
        f"0 enqueue failures; the run's jobs were purged; the SQLite file {fresh} it created stays, empty"
    )


def test_a_run_without_a_sigkill_warns_that_crash_recovery_was_not_exercised():
    fleet = FleetRecord()
    fleet.by_signal[signal.SIGTERM] = 1
    lines, causes = render(Sent(total=10), Tally(), Verdict(run="r", fleet=fleet))
    assert "warning: no worker was killed with SIGKILL" in lines[5] and lines[-1] == "ok"


def test_verify_passes_on_postgres_with_the_password_masked(runner, postgres_url):
    schema = f"vt_{uuid.uuid4().hex[:10]}"
    url = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    try:
        code, lines, err = runner.run(url, *SHORT, "--prefix", schema)
        assert_passed(code, lines, err)
        assert "s3cret" not in "\n".join(lines) + err
        assert "postgres:***@" in err and f"schema {schema}" in err
        assert store_jobs(f"{postgres_url}?schema={schema}") == 0
    finally:
        _drop_schema(postgres_url, schema)


def test_verify_passes_on_redis_and_leaves_no_key(runner, redis_url):
    prefix = f"vt{uuid.uuid4().hex[:10]}"
    url = f"{redis_url}?prefix={prefix}"
    code, lines, err = runner.run(url, *SHORT)
    assert_passed(code, lines, err)
    import redis

    client = redis.Redis.from_url(redis_url)
    assert list(client.scan_iter(match="{" + prefix + "}*")) == []
    client.close()


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- exit 1: each cause ---------------------------------------------------------------------


def test_a_job_deleted_behind_its_back_is_reported_lost(runner, db):
    runner.start(sqlite_url(db), *SHORT)
    wait_until(lambda: verify_jobs(db) >= 10, timeout=30, what="verify's first jobs")
    delete_the_first_job = """
        BEGIN IMMEDIATE;
        DELETE FROM executions WHERE job_seq = (SELECT min(seq) FROM jobs);
        DELETE FROM jobs WHERE seq = (SELECT min(seq) FROM jobs);
        COMMIT;
    """
    execute(db, delete_the_first_job)
    code, lines, err = runner.finish()
    assert code == 1, err
    assert lines[0].endswith(", 1 lost")
    assert "failed: 1 job lost (job 1)" in lines


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("fail", ("1 failed", "failed: 1 job failed (job 5)")),
        ("cancel", ("1 cancelled", "failed: 1 job cancelled (job 5)")),
    ],
)
def test_a_job_that_failed_or_was_cancelled_fails_the_run(runner, found_db, fault, expected):
    db = found_db
    code, lines, err = runner.run(sqlite_url(db), *SHORT, fault=fault)
    assert code == 1, err
    assert expected[0] in lines[0]
    assert expected[1] in lines
    assert lines[4] == "0 enqueue failures; the store is left as it was found"


def test_an_unfinished_job_is_a_store_that_does_not_settle(runner, db):
    code, lines, err = runner.run(sqlite_url(db), *SHORT, "--settle", "3.5", fault="snooze")
    assert code == 1, err
    assert "1 unfinished" in lines[0]
    assert "failed: 1 job unfinished (job 5)" in lines
    assert "failed: the store did not settle: 1 job still pending or running" in lines
    assert verify_jobs(db) == 0, "the snoozed job is cancelled and purged at the end"


def test_a_missing_side_effect_fails_the_run(runner, db):
    runner.start(sqlite_url(db), *SHORT)
    ledger = runner.ledger()
    wait_until(
        lambda: rows(ledger, "SELECT 1 FROM ledger WHERE n = 3"), timeout=30, what="job 3's side effect"
    )
    execute(ledger, "DELETE FROM ledger WHERE n = 3")
    code, lines, err = runner.finish()
    assert code == 1, err
    assert lines[2].endswith("; 1 job succeeded without its side effect")
    assert "failed: 1 job without its side effect (job 3)" in lines


def test_a_ledger_it_cannot_read_fails_the_run(runner, db):
    runner.start(sqlite_url(db), *SHORT)
    ledger = runner.ledger()
    wait_until(lambda: verify_jobs(db) >= 10, timeout=30, what="verify's first jobs")
    garbage = ledger.with_name("garbage")
    garbage.write_bytes(b"this is not a database" * 100)
    os.replace(garbage, ledger)  # the workers keep their open file; verify opens this one
    code, lines, err = runner.finish()
    assert code == 1, err
    assert lines[2].endswith("; the ledger could not be read")
    assert any(line.startswith("failed: the ledger could not be read: DatabaseError") for line in lines)


def test_a_worker_dying_on_its_own_fails_the_run(runner, db):
    runner.start(sqlite_url(db), *SHORT)
    wait_until(lambda: verify_jobs(db) >= 5, timeout=30, what="verify's first jobs")
    victim = runner.workers()[-1]  # verify kills its oldest worker: take the newest
    os.kill(victim, signal.SIGKILL)
    code, lines, err = runner.finish()
    assert code == 1, err
    assert lines[1].endswith(", 1 unexpected death")
    assert f"failed: worker {victim} died on its own (exit status -9)" in lines
    assert lines[0] == "sent 100 jobs: 100 succeeded, 0 failed, 0 cancelled, 0 unfinished, 0 lost"


def test_a_worker_not_stopping_cleanly_on_sigterm_fails_the_run(runner, db):
    code, lines, err = runner.run(sqlite_url(db), *SHORT, fault="term-exit")
    assert code == 1, err
    assert any(
        re.fullmatch(r"failed: worker \d+ did not stop cleanly: exit status 3 on SIGTERM", line)
        for line in lines
    )


def test_an_enqueue_failing_fails_the_run(runner, found_db):
    db = found_db
    prepare_sqlite(db)
    refuse_job_7 = """
        CREATE TRIGGER refuse_7 BEFORE INSERT ON jobs WHEN NEW.id LIKE 'verify:%:7'
        BEGIN SELECT RAISE(ABORT, 'injected: job 7 refused'); END;
    """
    execute(db, refuse_job_7)
    code, lines, err = runner.run(sqlite_url(db), *SHORT)
    assert code == 1, err
    assert lines[0] == "sent 100 jobs: 99 succeeded, 0 failed, 0 cancelled, 0 unfinished, 0 lost"
    assert lines[4] == "1 enqueue failure; the store is left as it was found"
    assert "failed: 1 enqueue failed, first job 7: IntegrityError: injected: job 7 refused" in lines


def test_a_store_failing_mid_run_fails_the_run(runner, db):
    """Settlements fail until the workers have logged a store error, then succeed."""
    prepare_sqlite(db)
    fail_every_settlement = """
        CREATE TRIGGER flaky BEFORE UPDATE ON jobs WHEN NEW.state = 'done'
        BEGIN SELECT RAISE(ABORT, 'injected: the store is failing'); END;
    """
    execute(db, fail_every_settlement)
    runner.start(sqlite_url(db), *SHORT, "--settle", "10")
    wait_until(runner.worker_store_errors, timeout=30, what="a worker to log a store error")
    execute(db, "DROP TRIGGER flaky")
    code, lines, err = runner.finish()
    assert code == 1, err
    assert lines[0] == "sent 100 jobs: 100 succeeded, 0 failed, 0 cancelled, 0 unfinished, 0 lost"
    assert any(
        re.fullmatch(r"failed: the store failed mid-run: the workers logged \d+ store errors", line)
        for line in lines
    )


def test_a_run_cut_short_by_sigint_fails_and_cleans_up(runner, found_db):
    db = found_db
    started = time.monotonic()
    proc = runner.start(sqlite_url(db), *SHORT[:1], "20", *SHORT[2:])
    wait_until(lambda: verify_jobs(db) >= 10, timeout=30, what="verify's first jobs")
    proc.send_signal(signal.SIGINT)
    code, lines, err = runner.finish()
    assert code == 1, err
    assert "failed: the run was cut short" in lines
    assert time.monotonic() - started < 15
    assert lines[4].endswith("; the store is left as it was found")
    assert rows(db, "SELECT count(*) FROM jobs")[0][0] == 0


def test_a_run_too_short_to_kill_anyone_fails():
    # Settings cannot ask for it (--kill-every must be shorter than --duration, exit 2), so the
    # verdict is shown directly: a run that stopped no worker proved nothing about kills.
    causes = failures(Sent(total=10), Tally(), Verdict(run="r", fleet=FleetRecord()))
    assert causes == ["the run was too short to kill anyone"]


def test_a_job_left_in_the_store_fails_the_run(runner, db):
    prepare_sqlite(db)
    keep_job_4 = """
        CREATE TRIGGER stay BEFORE DELETE ON jobs WHEN OLD.id LIKE 'verify:%:4'
        BEGIN SELECT RAISE(IGNORE); END;
    """
    execute(db, keep_job_4)
    code, lines, err = runner.run(sqlite_url(db), *SHORT)
    assert code == 1, err
    assert lines[4] == "0 enqueue failures; 1 job left in the store"
    assert "failed: 1 job left in the store" in lines


def test_other_jobs_appearing_mid_run_leave_everything_in_place(runner, db):
    runner.start(sqlite_url(db), *SHORT)
    wait_until(lambda: verify_jobs(db) >= 10, timeout=30, what="verify's first jobs")
    other = tinyjobs.App(sqlite_url(db))
    other.enqueue("someone.elses", {}, queue="elsewhere")
    other.close()
    code, lines, err = runner.finish()
    assert code == 0, "\n".join(lines) + err
    assert lines[4] == "0 enqueue failures; 1 other job appeared during the run, so nothing was purged"
    assert verify_jobs(db) == 100


def test_keep_leaves_the_finished_jobs(runner, db):
    code, lines, err = runner.run(sqlite_url(db), *SHORT, "--keep")
    assert code == 0, err
    assert lines[4] == "0 enqueue failures; the store keeps its 100 jobs (--keep)"
    assert rows(db, "SELECT state, count(*) FROM jobs GROUP BY state") == [("done", 100)]


def test_a_verifier_killed_outright_leaves_its_workers_to_stop(runner, db):
    proc = runner.start(sqlite_url(db), *SHORT[:1], "20", *SHORT[2:])
    wait_until(lambda: verify_jobs(db) >= 10, timeout=30, what="verify's first jobs")
    workers = runner.workers()
    assert len(workers) == 2
    proc.kill()
    proc.communicate()
    wait_until(
        lambda: not any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in workers),
        timeout=10,
        what="the orphaned workers to stop",
    )


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat[stat.rfind(")") + 2 :].split()[0]


# -- exit 2: before anything runs ------------------------------------------------------------


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "args",
    [
        ["--duration", "5", "--kill-every", "5"],
        ["--duration", "5", "--kill-every", "10"],
        ["--lease", "10", "--settle", "11"],
        ["--settle", "20"],
        ["--rate", "0"],
        ["--rate", "-3"],
        ["--workers", "0"],
        ["--slots", "0"],
        ["--duration", "0"],
        ["--duration", "soon"],
        ["--lease", "0.5"],
    ],
)
def test_settings_that_make_no_sense_exit_2_before_anything_runs(db, args):
    code, output = cli(sqlite_url(db), *args)
    assert code == 2, output
    assert not db.exists(), "nothing was opened"


def test_raising_only_the_lease_sizes_settle_to_twice_the_lease():
    assert settings("sqlite:///x.db").settle == 60
    assert settings("sqlite:///x.db", lease="45s").settle == 90
    assert settings("sqlite:///x.db", lease="2").settle > 2 + 1
    with pytest.raises(Refused):
        settings("sqlite:///x.db", lease="45s", settle="40s")


def test_prefix_names_the_namespace():
    pg = settings("postgresql://u:pw@h/db", prefix="vx")
    assert pg.store_url.endswith("schema=vx") and pg.queue == "vx"
    assert settings("postgresql://u@h/db?schema=mine").namespace == "schema mine"
    assert settings("redis://h/9").store_url.endswith("prefix=verify")
    assert settings("sqlite:///x.db", prefix="q1").queue == "q1"


def test_memory_store_exits_2():
    code, output = cli("memory://")
    assert code == 2
    assert "could not share it" in output


def test_unknown_scheme_exits_2():
    code, output = cli("mongodb://u:hunter2@h/db")
    assert code == 2
    assert "hunter2" not in output


def test_unwritable_sqlite_file_exits_2(tmp_path):
    code, output = cli(f"sqlite:///{tmp_path}/missing-dir/jobs.db")
    assert code == 2, output


def test_unreachable_postgres_exits_2_with_the_password_masked():
    code, output = cli("postgresql://postgres:hunter2@127.0.0.1:1/test?connect_timeout=2")
    assert code == 2, output
    assert "hunter2" not in output


def test_unreachable_redis_exits_2():
    code, output = cli("redis://127.0.0.1:1/0")
    assert code == 2, output


def test_a_sqlite_file_holding_other_jobs_exits_2(db):
    app = tinyjobs.App(sqlite_url(db))
    app.enqueue("someone.elses", {})
    app.close()
    code, output = cli(sqlite_url(db), *SHORT)
    assert code == 2, output
    assert "holds 1 job:" in output
    assert rows(db, "SELECT count(*) FROM jobs")[0][0] == 1


def test_a_redis_prefix_holding_other_jobs_exits_2(redis_url):
    prefix = f"vt{uuid.uuid4().hex[:10]}"
    url = f"{redis_url}?prefix={prefix}"
    app = tinyjobs.App(url)
    try:
        app.enqueue("someone.elses", {})
        code, output = cli(url, *SHORT)
        assert code == 2, output
        assert store_jobs(url) == 1
    finally:
        app.store.drop()
        app.close()
