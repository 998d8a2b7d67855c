"""The check report model, its rendering, masking, mountinfo parsing and the CLI's URL and
exit-status rules. Store behaviour is tested against real stores in
tests/integration/test_check_*.py."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from tinyjobs.check import (
    Report,
    apply_store_warnings,
    audit_url,
    health_findings,
    scrub,
    url_secrets,
)
from tinyjobs.cli.check import check, resolve_url
from tinyjobs.errors import ConfigError
from tinyjobs.findings import FAIL, NOT_CHECKED, PASS, WARN, Finding, failed, not_checked, passed, warned
from tinyjobs.stores.sqlite import filesystem as fs


def report_of(*findings: Finding, secrets: tuple[str, ...] = ()) -> Report:
    report = Report(url="redis://:***@h:1/0", store="redis", secrets=secrets)
    report.add(list(findings))
    return report


def test_ok_and_exit_code_follow_fail_only():
    assert report_of(passed("a", "x"), warned("b", "y", "r"), not_checked("c", "why")).ok
    assert report_of(passed("a", "x")).exit_code == 0
    bad = report_of(passed("a", "x"), failed("b", "y", "fix it"))
    assert not bad.ok and bad.exit_code == 1


def test_unknown_status_is_refused():
    with pytest.raises(ValueError):
        Finding("MAYBE", "a", "b")


def test_store_warnings_turns_store_fails_into_marked_warns_only():
    store_fail = failed("appendonly", "aof_enabled=0", "appendonly yes")
    supervisor_fail = Finding(FAIL, "supervisor.workers", "none", "see", source="supervisor")
    out = apply_store_warnings([store_fail, supervisor_fail, not_checked("x", "why")])
    assert [f.status for f in out] == [WARN, FAIL, NOT_CHECKED]
    assert out[0].downgraded and not out[1].downgraded


def test_to_dict_shape():
    data = report_of(passed("a", "x"), failed("b", "y", "fix")).to_dict()
    assert set(data) == {"ok", "exit_code", "url", "store", "counts", "findings"}
    assert data["ok"] is False and data["exit_code"] == 1
    assert data["counts"] == {FAIL: 1, WARN: 0, NOT_CHECKED: 0, PASS: 1}
    assert data["findings"][1] == {
        "status": FAIL,
        "setting": "b",
        "seen": "y",
        "remedy": "fix",
        "source": "store",
        "downgraded": False,
    }
    json.dumps(data)


def test_render_names_setting_seen_remedy_and_verdict():
    text = report_of(failed("appendonly", "aof_enabled=0", "appendonly yes")).render()
    assert "FAIL" in text and "appendonly: aof_enabled=0" in text
    assert "remedy: appendonly yes" in text
    assert text.splitlines()[-1].startswith("FAILED")
    assert report_of(passed("a", "x")).render().splitlines()[-1].startswith("ok")


def test_secrets_are_scrubbed_from_every_finding():
    secrets = url_secrets("redis://user:s3cret@127.0.0.1:6379/0")
    report = report_of(failed("x", "auth s3cret failed", "use s3cret"), secrets=secrets)
    assert "s3cret" not in report.render() and "s3cret" not in report.to_json()
    assert "p@ss" in url_secrets("postgresql://h/db?password=p%40ss")
    assert scrub("a p@ss b", ("p@ss",)) == "a *** b"


def test_memory_url_fails_and_bad_url_is_config_error():
    assert audit_url("memory://").exit_code == 1
    with pytest.raises(ConfigError):
        audit_url("bogus://x")
    with pytest.raises(ConfigError):
        audit_url("sqlite://host/x.db")


def test_health_findings():
    good = health_findings({"workers": [{"pid": 1}], "store": {"reachable": True}})
    assert [f.status for f in good] == [PASS, PASS]
    assert all(f.source == "supervisor" for f in good)
    bad = health_findings({"workers": [], "store": {"reachable": False, "error": "refused"}})
    assert [f.status for f in bad] == [FAIL, FAIL]
    assert [f.status for f in health_findings({})] == [NOT_CHECKED, NOT_CHECKED]


# --- mountinfo ------------------------------------------------------------------------------

LINE = "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue"


def test_parse_line_handles_optional_fields_and_escapes():
    mount = fs.parse_line(LINE)
    assert mount is not None
    assert (mount.mount_id, mount.parent_id, mount.major, mount.minor) == (36, 35, 98, 0)
    assert mount.mount_point == "/mnt/with space"
    assert mount.fstype == "ext3" and mount.source == "/dev/root"
    assert fs.parse_line("garbage") is None


@pytest.mark.parametrize(
    ("fstype", "options", "verdict"),
    [
        ("nfs4", "rw", "network"),
        ("cifs", "rw", "network"),
        ("9p", "rw", "network"),
        ("fuse.sshfs", "rw", "network"),
        ("ceph", "rw", "network"),
        ("tmpfs", "rw", "ram"),
        ("ramfs", "rw", "ram"),
        ("overlay", "rw,lowerdir=/a", "layer"),
        ("overlay", "rw,volatile", "volatile"),
        ("aufs", "rw", "layer"),
        ("ext4", "rw", "local"),
        ("xfs", "rw", "local"),
    ],
)
def test_classify(fstype, options, verdict):
    mount = fs.Mount(1, 0, 0, 1, "/", "/data", "rw", fstype, "src", options)
    assert fs.classify(mount)[0] == verdict


def test_mount_of_prefers_longest_prefix_with_same_device_and_topmost(tmp_path):
    dev = os.stat(tmp_path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    mounts = [
        fs.Mount(1, 0, major, minor, "/", "/", "rw", "ext4", "/dev/a", "rw"),
        fs.Mount(2, 1, 99, 99, "/", str(tmp_path), "rw", "tmpfs", "t", "rw"),  # other device
        fs.Mount(3, 1, major, minor, "/", str(tmp_path.parent), "rw", "xfs", "b", "rw"),
        fs.Mount(4, 3, major, minor, "/", str(tmp_path.parent), "rw", "btrfs", "c", "rw"),
    ]
    assert fs.mount_of(tmp_path / "missing.db", mounts).fstype == "btrfs"
    assert fs.is_mount_point(tmp_path, mounts)
    assert not fs.is_mount_point(tmp_path / "missing.db", mounts)


# --- the CLI --------------------------------------------------------------------------------


def test_url_resolution_order(monkeypatch):
    ctx = check.make_context("check", [])
    monkeypatch.delenv("TINYJOBS_URL", raising=False)
    assert resolve_url(ctx, None) == "sqlite:///tinyjobs.db"
    monkeypatch.setenv("TINYJOBS_URL", "redis://env")
    assert resolve_url(ctx, None) == "redis://env"
    ctx.obj = {"url": "redis://global"}
    assert resolve_url(ctx, None) == "redis://global"
    assert resolve_url(ctx, "redis://arg") == "redis://arg"


def test_cli_bad_url_exits_2_masked():
    result = CliRunner().invoke(check, ["bogus://u:s3cret@h/x"])
    assert result.exit_code == 2
    assert "unknown scheme" in result.output and "s3cret" not in result.output
    result = CliRunner().invoke(check, ["bogus://u:s3cret@h/x", "--json"])
    assert result.exit_code == 2 and json.loads(result.output)["ok"] is False


def test_cli_uses_ctx_obj_url(tmp_path):
    db = tmp_path / "x.db"
    sqlite3.connect(db).close()
    result = CliRunner().invoke(check, ["--json"], obj={"url": f"sqlite:///{db}"})
    assert json.loads(result.output)["url"] == f"sqlite:///{db}"


def test_socket_health_joins_the_verdict(tmp_path, monkeypatch):
    import tinyjobs.cli.check as cli_check

    db = tmp_path / "x.db"
    sqlite3.connect(db).close()
    health = {"workers": [], "store": {"reachable": True}}
    monkeypatch.setattr(cli_check, "supervisor_health", lambda path: health)
    result = CliRunner().invoke(check, [f"sqlite:///{db}", "--socket", "/s", "--json"])
    data = json.loads(result.output)
    workers = next(f for f in data["findings"] if f["setting"] == "supervisor.workers")
    assert workers["status"] == FAIL and workers["source"] == "supervisor"
    assert result.exit_code == 1


def test_a_socket_where_nothing_answers_exits_2(tmp_path):
    result = CliRunner().invoke(check, [f"sqlite:///{tmp_path}/x.db", "--socket", str(tmp_path / "no.sock")])
    assert result.exit_code == 2 and "no supervisor answers" in result.output


def test_stale_leader_duties_fail_the_check(tmp_path, monkeypatch):
    db = tmp_path / "jobs.db"
    sqlite3.connect(db).execute("PRAGMA journal_mode=WAL").fetchone()
    health = {
        "workers": [{"pid": 1}],
        "store": {"reachable": True},
        "problems": ["leader duties are stale: no reap in the last 10 s"],
    }
    import tinyjobs.cli.check as cli_check

    monkeypatch.setattr(cli_check, "supervisor_health", lambda path: health)
    result = CliRunner().invoke(check, [f"sqlite:///{db}", "--socket", "/s", "--json"])
    leader = next(f for f in json.loads(result.output)["findings"] if f["setting"] == "supervisor.leader")
    assert leader["status"] == FAIL and result.exit_code == 1
