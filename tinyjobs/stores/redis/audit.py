"""`tinyjobs check` for Redis: persistence, eviction, memory and role, read from INFO; only
`appendfsync` needs `CONFIG GET`. A command the server hides or renames, or an ACL refusal, is
NOT CHECKED with the reason, never PASS. Nothing is written."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
import redis.connection

from tinyjobs.errors import StoreUnavailable
from tinyjobs.findings import Finding, failed, not_checked, passed, warned
from tinyjobs.urls import mask

from .connection import database, no_such_database

NEAR_FULL = 0.9
_SECTIONS = ("server", "persistence", "memory", "replication")


def audit(url: str) -> list[Finding]:
    """Every finding for the Redis server that `url` names."""
    client = _client(url)
    try:
        info, reason = _read_info(client, url)
        if info is None:
            return _all_not_checked(reason)
        return [
            *_persistence(info, _appendfsync(client)),
            _eviction(info),
            _memory(info),
            _role(info),
        ]
    finally:
        client.close()


def _client(url: str) -> redis.Redis:
    """A client for `url`, without the query options that are tinyjobs' own (prefix, ...)."""
    database(url)  # ConfigError for a database that is not a number
    parts = urlsplit(url)
    known = set(redis.connection.URL_QUERY_ARGUMENT_PARSERS)
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k in known or k.startswith("ssl_")
    ]
    clean = urlunsplit(parts._replace(query=urlencode(query)))
    return redis.Redis.from_url(clean, socket_timeout=5, socket_connect_timeout=5)


def _read_info(client: redis.Redis, url: str) -> tuple[dict | None, str]:
    """(INFO fields, "") or (None, why) when ACL refuses INFO. Unreachable or refused
    (wrong password) raises StoreUnavailable."""
    info: dict = {}
    try:
        for section in _SECTIONS:
            info.update(client.info(section))
    except redis.exceptions.NoPermissionError as err:
        return None, f"INFO refused by ACL: {err}"
    except redis.exceptions.AuthenticationError as err:
        raise StoreUnavailable(f"Redis at {mask(url)} refused us: {err}") from None
    except redis.exceptions.ResponseError as err:
        if (refused := no_such_database(url, err)) is not None:
            raise refused from None
        if "unknown command" in str(err).lower():
            return None, f"INFO is disabled or renamed: {err}"
        raise StoreUnavailable(f"Redis at {mask(url)} refused INFO: {err}") from None
    except redis.exceptions.RedisError as err:
        raise StoreUnavailable(f"Redis at {mask(url)} is unreachable: {err}") from None
    return info, ""


def _all_not_checked(reason: str) -> list[Finding]:
    settings = (
        "appendonly",
        "appendfsync",
        "aof_last_write_status",
        "aof_last_bgrewrite_status",
        "rdb_last_bgsave_status",
        "maxmemory-policy",
        "used_memory",
        "role",
    )
    remedy = "grant the check's user INFO (+info) and CONFIG GET (+config|get)"
    return [not_checked(s, reason, remedy) for s in settings]


def _appendfsync(client: redis.Redis) -> Finding:
    """appendfsync from CONFIG GET: always PASS, everysec WARN, no FAIL."""
    try:
        value = client.config_get("appendfsync").get("appendfsync")
    except redis.exceptions.NoPermissionError as err:
        return not_checked("appendfsync", f"CONFIG GET refused by ACL: {err}")
    except redis.exceptions.ResponseError as err:
        return not_checked("appendfsync", f"CONFIG is disabled or renamed: {err}")
    if value is None:
        return not_checked("appendfsync", "CONFIG GET appendfsync returned nothing")
    value = value.decode() if isinstance(value, bytes) else str(value)
    if value == "always":
        return passed("appendfsync", value)
    if value == "everysec":
        return warned(
            "appendfsync",
            "everysec: up to about a second of acknowledged writes can be lost on a crash",
            "appendfsync always",
        )
    return failed("appendfsync", value, "appendfsync always (or everysec)")


def _persistence(info: dict, appendfsync: Finding) -> list[Finding]:
    managed = "elasticache" in str(info.get("os", "")).lower()
    aof_remedy = "appendonly yes (with appendfsync always or everysec)"
    if managed:
        aof_remedy = (
            "ElastiCache cannot give per-write durability; use a store that can (self-managed "
            "Redis with appendonly, or PostgreSQL)"
        )
    out = []
    if info.get("aof_enabled") in (1, "1"):
        out.append(passed("appendonly", "yes"))
        out.append(appendfsync)
        out.append(_status(info, "aof_last_write_status", True, "free disk space in Redis's dir"))
        out.append(_status(info, "aof_last_bgrewrite_status", False, "disk space, fork memory"))
    else:
        out.append(failed("appendonly", f"aof_enabled={info.get('aof_enabled')}", aof_remedy))
        # The AOF's own items mean nothing without an AOF: not applicable, neither PASS nor WARN.
        out += [
            not_checked(name, "not applicable: appendonly is off, there is no AOF")
            for name in ("appendfsync", "aof_last_write_status", "aof_last_bgrewrite_status")
        ]
    out.append(_status(info, "rdb_last_bgsave_status", True, "free disk space in Redis's dir"))
    if info.get("loading") in (1, "1"):
        out.append(warned("loading", "the server is loading its data", "re-run check"))
    return out


def _status(info: dict, name: str, fatal: bool, remedy: str) -> Finding:
    value = info.get(name)
    if value is None:
        return not_checked(name, "INFO does not report it")
    if value == "ok":
        return passed(name, "ok")
    make = failed if fatal else warned
    return make(name, str(value), remedy)


def _eviction(info: dict) -> Finding:
    policy = info.get("maxmemory_policy")
    if policy is None:
        return not_checked("maxmemory-policy", "INFO memory does not report it")
    remedy = "maxmemory-policy noeviction"
    if str(policy).startswith("allkeys-"):
        return failed("maxmemory-policy", f"{policy}: evicts jobs when memory is full", remedy)
    if str(policy).startswith("volatile-"):
        return warned("maxmemory-policy", f"{policy}: evicts keys that have a TTL", remedy)
    return passed("maxmemory-policy", str(policy))


def _memory(info: dict) -> Finding:
    used, limit = info.get("used_memory"), info.get("maxmemory")
    if not isinstance(used, int) or not isinstance(limit, int):
        return not_checked("used_memory", "INFO memory does not report used_memory/maxmemory")
    if limit == 0:
        return passed("used_memory", f"{used} bytes, maxmemory 0 (no limit)")
    share = used / limit
    seen = f"{used} of maxmemory {limit} bytes ({share:.0%})"
    if share >= NEAR_FULL:
        return failed("used_memory", seen, "raise maxmemory, or purge finished jobs")
    return passed("used_memory", seen)


def _role(info: dict) -> Finding:
    role = info.get("role")
    if role is None:
        return not_checked("role", "INFO replication does not report it")
    if role == "master":
        return passed("role", "master")
    primary = f"{info.get('master_host', '?')}:{info.get('master_port', '?')}"
    return failed(
        "role",
        f"{role} of {primary} (link {info.get('master_link_status', '?')}): writes are refused",
        "point the URL at the primary",
    )
