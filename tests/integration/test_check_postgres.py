"""`tinyjobs check` against throw-away PostgreSQL clusters (initdb + pg_ctl on a free loopback
port), each deliberately misconfigured in one way: fsync off, a standby, a server
default of synchronous_commit=off, autovacuum off, Neon's settings, settings a role may not
read."""

from __future__ import annotations

import json
import shutil

import psycopg
import pytest
from click.testing import CliRunner
from support.servers import free_port, postgres_server, postgres_standby

from tinyjobs.check import audit_url
from tinyjobs.cli.check import check

pytestmark = pytest.mark.skipif(
    shutil.which("initdb") is None or shutil.which("pg_ctl") is None,
    reason="initdb/pg_ctl are not installed",
)


def run(url: str, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(check, [url, *args, "--json"])
    return result.exit_code, json.loads(result.output)


def finding(data: dict, setting: str) -> dict:
    return next(f for f in data["findings"] if f["setting"] == setting)


def test_a_durable_server_passes(tmp_path):
    with postgres_server(tmp_path, {"fsync": "on"}) as server:
        code, data = run(server.url)
    assert code == 0, data
    assert {f["status"] for f in data["findings"]} == {"PASS"}


def test_fsync_off_fails_and_store_warnings_downgrades_it(tmp_path):
    with postgres_server(tmp_path, {"fsync": "off"}) as server:
        code, data = run(server.url)
        assert code == 1 and finding(data, "fsync")["status"] == "FAIL"
        assert "fsync = on" in finding(data, "fsync")["remedy"]
        code, data = run(server.url, "--store-warnings")
    assert code == 0 and finding(data, "fsync")["status"] == "WARN"
    assert finding(data, "fsync")["downgraded"] is True


def test_autovacuum_off_warns(tmp_path):
    with postgres_server(tmp_path, {"fsync": "on", "autovacuum": "off"}) as server:
        code, data = run(server.url)
    assert code == 0 and finding(data, "autovacuum")["status"] == "WARN"
    assert "autovacuum = off" in finding(data, "autovacuum")["seen"]
    assert "autovacuum = on" in finding(data, "autovacuum")["remedy"]


def test_fsync_off_on_neon_passes(tmp_path):
    # Neon computes run fsync=off and expose neon.timeline_id: a custom setting reproduces it.
    with postgres_server(tmp_path, {"fsync": "off", "neon.timeline_id": "tl-1"}) as server:
        code, data = run(server.url)
    assert code == 0 and finding(data, "fsync")["status"] == "PASS"
    assert "Neon" in finding(data, "fsync")["seen"]


def test_a_standby_fails(tmp_path):
    with postgres_server(tmp_path, {"fsync": "on"}) as primary:
        with postgres_standby(primary, {"fsync": "on"}) as standby:
            code, data = run(standby.url)
    entry = finding(data, "pg_is_in_recovery()")
    assert code == 1 and entry["status"] == "FAIL" and "standby" in entry["seen"]
    assert "target_session_attrs" in entry["remedy"]


def test_synchronous_commit_off_default_warns_and_explains(tmp_path):
    with postgres_server(tmp_path, {"fsync": "on", "synchronous_commit": "off"}) as server:
        code, data = run(server.url)
    entry = finding(data, "synchronous_commit")
    assert code == 0 and entry["status"] == "WARN"
    assert entry["seen"].startswith("off")
    assert "tinyjobs' own connections raise it to on" in entry["seen"]
    assert "your own connection inside your transaction" in entry["seen"]


def test_settings_a_role_may_not_read_are_not_checked(tmp_path):
    with postgres_server(tmp_path, {"fsync": "on"}) as server:
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE ROLE auditor LOGIN")
            admin.execute("REVOKE SELECT ON pg_catalog.pg_settings FROM PUBLIC")
            admin.execute("REVOKE EXECUTE ON FUNCTION pg_is_in_recovery() FROM PUBLIC")
        code, data = run(server.url.replace("postgres@", "auditor@"))
    entry = finding(data, "pg_is_in_recovery()")
    assert entry["status"] == "NOT CHECKED" and "InsufficientPrivilege" in entry["seen"]
    assert finding(data, "synchronous_commit")["status"] == "PASS"  # read by SHOW instead
    assert code == 0


def test_tinyjobs_url_options_and_password_are_handled(tmp_path):
    with postgres_server(tmp_path, {"fsync": "off"}) as server:
        url = server.url.replace("postgres@", "postgres:s3cret@") + "?schema=jobs"
        results = [CliRunner().invoke(check, [url, *flags]) for flags in ([], ["--json"])]
        report = audit_url(url)
    for result in results:
        assert result.exit_code == 1 and "s3cret" not in result.output
        assert "postgres:***@" in result.output
    assert "s3cret" not in repr(report)


def test_an_unreachable_server_exits_2():
    url = f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/postgres"
    result = CliRunner().invoke(check, [url])
    assert result.exit_code == 2 and "unreachable" in result.output
    assert "s3cret" not in result.output
