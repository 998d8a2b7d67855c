"""`tinyjobs check` on real SQLite files, each deliberately misconfigured in one way:
a file that was never put in WAL mode, one in /dev/shm, ?synchronous=normal and =off, a
missing file, and, in a private mount namespace (`unshare -m`), a bind-mounted file, an
overlay mount and a tiny tmpfs with under 64 MB free."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tinyjobs.cli.check import check
from tinyjobs.errors import StoreUnavailable
from tinyjobs.stores.sqlite import filesystem as fs
from tinyjobs.stores.sqlite.audit import audit


def make_db(path: Path, wal: bool = True) -> Path:
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
    conn.commit()
    conn.close()
    return path


def run(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(check, [*args, "--json"])
    return result.exit_code, json.loads(result.output)


def by_setting(data: dict) -> dict[str, dict]:
    return {f["setting"]: f for f in data["findings"]}


@pytest.fixture
def local_dir(tmp_path: Path) -> Path:
    """tmp_path, provided it is on a local disk (else the 'good file' tests cannot pass)."""
    verdict, why = fs.classify(fs.mount_of(tmp_path))
    if verdict != "local":
        pytest.skip(f"tmp_path is not on a local disk: {why}")
    return tmp_path


def test_a_wal_file_on_a_local_disk_passes(local_dir):
    db = make_db(local_dir / "jobs.db")
    code, data = run(f"sqlite:///{db}")
    assert code == 0, data
    assert {f["status"] for f in data["findings"]} == {"PASS"}
    assert set(by_setting(data)) >= {"journal_mode", "synchronous", "filesystem", "free space"}


def test_a_file_never_put_in_wal_fails(local_dir):
    db = make_db(local_dir / "plain.db", wal=False)
    code, data = run(f"sqlite:///{db}")
    finding = by_setting(data)["journal_mode"]
    assert code == 1 and finding["status"] == "FAIL" and finding["seen"] == "delete"
    assert "WAL" in finding["remedy"]


def test_check_changes_nothing(local_dir):
    db = make_db(local_dir / "plain.db", wal=False)
    before = (db.read_bytes(), db.stat().st_mtime_ns)
    run(f"sqlite:///{db}?synchronous=normal")
    assert (db.read_bytes(), db.stat().st_mtime_ns) == before
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    missing = local_dir / "missing.db"
    code, data = run(f"sqlite:///{missing}")
    assert not missing.exists()
    assert code == 1 and "no such database" in by_setting(data)["database"]["seen"]
    assert by_setting(data)["journal_mode"]["status"] == "NOT CHECKED"


def test_synchronous_normal_warns_and_off_fails(local_dir):
    db = make_db(local_dir / "jobs.db")
    code, data = run(f"sqlite:///{db}?synchronous=normal")
    finding = by_setting(data)["synchronous"]
    assert code == 0 and finding["status"] == "WARN"
    assert "not a power loss" in finding["seen"]
    assert by_setting(data)["synchronous (plain)"]["seen"].startswith(("FULL", "EXTRA", "NORMAL"))
    code, data = run(f"sqlite:///{db}?synchronous=off")
    assert code == 1 and by_setting(data)["synchronous"]["status"] == "FAIL"
    result = CliRunner().invoke(check, [f"sqlite:///{db}?synchronous=sometimes"])
    assert result.exit_code == 2 and "synchronous" in result.output


@pytest.fixture
def shm_db():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm on this machine")
    directory = Path("/dev/shm") / f"tinyjobs-check-{os.getpid()}"
    directory.mkdir(exist_ok=True)
    yield make_db(directory / "jobs.db")
    shutil.rmtree(directory, ignore_errors=True)


def test_a_file_in_dev_shm_fails_as_tmpfs(shm_db):
    code, data = run(f"sqlite:///{shm_db}")
    finding = by_setting(data)["filesystem"]
    assert code == 1 and finding["status"] == "FAIL" and finding["seen"].startswith("tmpfs")


def test_store_warnings_turns_the_fails_into_warns(shm_db):
    code, data = run(f"sqlite:///{shm_db}", "--store-warnings")
    finding = by_setting(data)["filesystem"]
    assert code == 0 and data["ok"] is True
    assert finding["status"] == "WARN" and finding["downgraded"] is True
    text = CliRunner().invoke(check, [f"sqlite:///{shm_db}", "--store-warnings"]).output
    assert "shown as WARN by --store-warnings" in text


def test_not_a_database_is_refused(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_text("this is not a database " * 20)
    with pytest.raises(StoreUnavailable):
        audit(f"sqlite:///{junk}")
    assert CliRunner().invoke(check, [f"sqlite:///{junk}"]).exit_code == 2


# --- a private mount namespace --------------------------------------------------------------

RUNNER = "import sys; from tinyjobs.cli.check import check; check(sys.argv[1:])"


def in_namespace(setup: str, url: str) -> tuple[int, dict]:
    """Run `setup` (shell mounts) then `tinyjobs check URL --json` in a private mount
    namespace; skip with the reason when the machine does not allow one."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    base = ["unshare", "-m", "--propagation", "private"]
    if os.geteuid() != 0:
        base.insert(1, "-r")
    probe = subprocess.run([*base, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.strip()}")
    script = f'{setup} || exit 99\nexec "$@"'
    cmd = [*base, "sh", "-c", script, "sh", sys.executable, "-c", RUNNER, url, "--json"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if result.returncode == 99:
        pytest.skip(f"mounting is not allowed here: {result.stderr.strip()}")
    return result.returncode, json.loads(result.stdout)


def test_a_bind_mounted_file_fails_as_a_mount_point(local_dir):
    source = make_db(local_dir / "host.db")
    target = local_dir / "app.db"
    target.touch()
    code, data = in_namespace(f"mount --bind {source} {target}", f"sqlite:///{target}")
    finding = by_setting(data)["mount point"]
    assert code == 1 and finding["status"] == "FAIL"
    assert str(target) in finding["seen"] and "-wal" in finding["seen"]


def test_an_overlay_layer_fails(local_dir):
    for name in ("lower", "upper", "work", "merged"):
        (local_dir / name).mkdir()
    make_db(local_dir / "lower" / "jobs.db")
    options = f"lowerdir={local_dir}/lower,upperdir={local_dir}/upper,workdir={local_dir}/work"
    setup = f"mount -t overlay overlay -o {options} {local_dir}/merged"
    code, data = in_namespace(setup, f"sqlite:///{local_dir}/merged/jobs.db")
    finding = by_setting(data)["filesystem"]
    assert code == 1 and finding["status"] == "FAIL" and finding["seen"].startswith("overlay")


def test_under_64_mb_free_fails(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    setup = (
        f"mount -t tmpfs -o size=8m tmpfs {mnt} && "
        f"{sys.executable} -c \"import sqlite3; sqlite3.connect('{mnt}/jobs.db')"
        f".execute('PRAGMA journal_mode=WAL')\""
    )
    code, data = in_namespace(setup, f"sqlite:///{mnt}/jobs.db")
    findings = by_setting(data)
    assert code == 1
    assert findings["free space"]["status"] == "FAIL" and "under 64 MB" in findings["free space"]["seen"]
    assert findings["journal_mode"]["status"] == "PASS"
