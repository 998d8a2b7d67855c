"""`tinyjobs check` against real redis-servers, each deliberately misconfigured in one way,
plus the shared CI Redis, which keeps nothing on disk and so must fail."""

from __future__ import annotations

import json
import shutil

import pytest
import redis
from click.testing import CliRunner
from support.servers import RedisServer, redis_server
from support.wait import wait_until

from tinyjobs.check import audit_url
from tinyjobs.cli.check import check

DURABLE = ("--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction")


def run(url: str, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(check, [url, *args, "--json"])
    return result.exit_code, json.loads(result.output)


def statuses(data: dict) -> dict[str, str]:
    return {f["setting"]: f["status"] for f in data["findings"]}


def test_the_shared_ci_redis_keeps_nothing_on_disk_so_check_fails(redis_url):
    code, data = run(redis_url)
    assert code == 1
    assert statuses(data)["appendonly"] == "FAIL"


def test_a_durable_redis_passes(tmp_path):
    with redis_server(tmp_path, *DURABLE) as server:
        code, data = run(server.url)
    assert code == 0, data
    assert set(statuses(data).values()) == {"PASS"}


def test_appendonly_off_fails_and_store_warnings_downgrades_it(tmp_path):
    with redis_server(tmp_path, "--appendonly", "no") as server:
        code, data = run(server.url)
        assert code == 1 and statuses(data)["appendonly"] == "FAIL"
        code, data = run(server.url, "--store-warnings")
    finding = next(f for f in data["findings"] if f["setting"] == "appendonly")
    assert code == 0 and finding["status"] == "WARN" and finding["downgraded"]


def test_appendfsync_everysec_warns(tmp_path):
    with redis_server(tmp_path, *DURABLE[:2], "--appendfsync", "everysec") as server:
        code, data = run(server.url)
    assert code == 0 and statuses(data)["appendfsync"] == "WARN"


@pytest.mark.parametrize(("policy", "status"), [("allkeys-lru", "FAIL"), ("volatile-lru", "WARN")])
def test_eviction_policy(tmp_path, policy, status):
    with redis_server(tmp_path, *DURABLE[:4], "--maxmemory-policy", policy) as server:
        code, data = run(server.url)
    assert statuses(data)["maxmemory-policy"] == status
    assert code == (1 if status == "FAIL" else 0)


def test_a_tiny_maxmemory_filled_up_fails(tmp_path):
    with redis_server(tmp_path, *DURABLE, "--maxmemory", "2mb") as server:
        client = redis.Redis.from_url(server.url)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            for i in range(1000):
                client.set(f"k{i}", b"x" * 10_000)
        code, data = run(server.url)
    finding = next(f for f in data["findings"] if f["setting"] == "used_memory")
    assert code == 1 and finding["status"] == "FAIL" and "of maxmemory" in finding["seen"]


def test_a_replica_fails(tmp_path):
    with redis_server(tmp_path, *DURABLE) as primary:
        replica_of = ("--replicaof", "127.0.0.1", str(primary.port))
        with redis_server(tmp_path, *DURABLE, *replica_of) as replica:
            code, data = run(replica.url)
    finding = next(f for f in data["findings"] if f["setting"] == "role")
    assert code == 1 and finding["status"] == "FAIL"
    assert finding["seen"].startswith("slave of 127.0.0.1")


def test_config_renamed_away_is_not_checked_never_pass(tmp_path):
    with redis_server(tmp_path, *DURABLE, "--rename-command", "CONFIG", "") as server:
        code, data = run(server.url)
    finding = next(f for f in data["findings"] if f["setting"] == "appendfsync")
    assert finding["status"] == "NOT CHECKED" and "unknown command" in finding["seen"].lower()
    assert code == 0  # everything INFO gives passes; NOT CHECKED alone does not fail


def test_acl_refusals_are_not_checked(tmp_path):
    with redis_server(tmp_path, *DURABLE) as server:
        admin = redis.Redis.from_url(server.url)
        admin.acl_setuser(
            "noconfig", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-config"]
        )
        admin.acl_setuser("noinfo", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"])
        base = f"127.0.0.1:{server.port}/0"
        _, partial = run(f"redis://noconfig:pw@{base}")
        _, blind = run(f"redis://noinfo:pw@{base}")
    assert statuses(partial)["appendfsync"] == "NOT CHECKED"
    assert "NOPERM" in str(partial) or "permission" in str(partial).lower()
    assert statuses(partial)["appendonly"] == "PASS"
    assert set(statuses(blind).values()) == {"NOT CHECKED"}


class FullDiskRedis(RedisServer):
    """A redis-server whose dir is a 4 MB tmpfs in a private mount namespace."""

    def command(self) -> list[str]:
        setup = f'mount -t tmpfs -o size=4m tmpfs {self.dir} && exec "$@"'
        base = ["unshare", "-m", "--propagation", "private", "sh", "-c", setup, "sh"]
        return base + super().command()


def test_failed_aof_write_and_snapshot_fail_and_failed_rewrite_warns(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    args = ("--appendonly", "yes", "--appendfsync", "everysec")
    try:
        context = redis_server(tmp_path, *args, server_class=FullDiskRedis)
        server = context.__enter__()
    except AssertionError as err:
        pytest.skip(f"cannot mount a tmpfs in a private namespace here: {err}")
    try:
        client = redis.Redis.from_url(server.url)
        with pytest.raises(redis.exceptions.RedisError):
            for i in range(2000):
                client.set(f"k{i}", b"x" * 20_000)
        wait_until(lambda: client.info("persistence")["aof_last_write_status"] == "err")
        client.bgrewriteaof()  # nor can a rewrite of the AOF
        wait_until(lambda: client.info("persistence")["aof_last_bgrewrite_status"] == "err")
        wait_until(lambda: client.info("persistence")["aof_rewrite_in_progress"] == 0)
        client.execute_command("BGSAVE", "SCHEDULE")  # nor a snapshot
        wait_until(lambda: client.info("persistence")["rdb_last_bgsave_status"] == "err")
        code, data = run(server.url)
    finally:
        context.__exit__(None, None, None)
    assert code == 1 and statuses(data)["aof_last_write_status"] == "FAIL"
    assert statuses(data)["rdb_last_bgsave_status"] == "FAIL"
    assert statuses(data)["aof_last_bgrewrite_status"] == "WARN"


def test_the_password_never_shows(tmp_path):
    with redis_server(tmp_path, "--requirepass", "s3cret") as server:
        assert "s3cret" in server.url
        outputs = [CliRunner().invoke(check, [server.url, *flags]) for flags in ([], ["--json"])]
        wrong = server.url.replace("s3cret", "wr0ng")
        refused = CliRunner().invoke(check, [wrong])
        report = audit_url(server.url)
    for result in outputs:
        assert result.exit_code == 1 and "s3cret" not in result.output
        assert ":***@127.0.0.1" in result.output
    assert "s3cret" not in repr(report) and "s3cret" not in report.render()
    assert refused.exit_code == 2 and "wr0ng" not in refused.output


def test_an_unreachable_redis_exits_2(tmp_path):
    with redis_server(tmp_path) as server:
        url = server.url
    result = CliRunner().invoke(check, [url.replace("redis://", "redis://:s3cret@")])
    assert result.exit_code == 2 and "unreachable" in result.output
    assert "s3cret" not in result.output
