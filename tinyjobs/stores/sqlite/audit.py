"""`tinyjobs check` for a SQLite file: journal mode, synchronous, filesystem, free space.

Read-only: the file is opened as `file:...?mode=ro` (never created, nothing assigned that
outlives our own connection). Like any SQLite reader of a WAL database, opening it may leave
empty `-wal`/`-shm` files beside it, which SQLite itself manages.

A missing file is a FAIL ("no such database"): the path checks (filesystem, free space) still
run on the directory it would be created in, so the report says whether it would be safe there.
A path that cannot be opened at all, or holds something that is not a database, raises
StoreUnavailable.
"""

from __future__ import annotations

import os
import sqlite3
from urllib.parse import quote

from tinyjobs.errors import ConfigError, StoreUnavailable
from tinyjobs.findings import Finding, failed, not_checked, passed, warned
from tinyjobs.stores.sqlite import filesystem as fs
from tinyjobs.urls import mask, split

MIN_FREE = 64 * 1024 * 1024
LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
_OWN_LEVELS = {"full": 2, "extra": 3, "normal": 1, "off": 0}
_UNSAFE_OPTIONS = {"mode": {"memory"}, "immutable": {"1", "true"}, "nolock": {"1", "true"}}


def database_path(url: str) -> tuple[str, dict[str, str]]:
    """(path, query) of a sqlite:/// URL: `sqlite:///rel.db` is relative to the working
    directory, `sqlite:////abs.db` absolute."""
    _, netloc, path, query = split(url)
    if netloc or not path.startswith("/") or path in ("/", "//"):
        raise ConfigError(
            f"SQLite URL {mask(url)!r} names no file: use sqlite:///relative.db or "
            "sqlite:////absolute/path.db"
        )
    path = path[1:]
    if path == ":memory:":
        return path, query
    return os.path.abspath(path), query


def audit(url: str) -> list[Finding]:
    """Every finding for the SQLite database that `url` names."""
    path, query = database_path(url)
    findings = _option_findings(query)
    if path == ":memory:":
        return findings + [failed("path", ":memory:", "an in-memory database keeps nothing; name a file")]
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        # Nothing can be created there, so nothing there can be judged (the filesystem item
        # would describe whichever mount holds the nearest existing parent).
        return findings + [
            failed(
                "database",
                f"no such directory: {folder} (for {path})",
                f"create the directory (mkdir -p {folder}) or fix the path, then run "
                f"tinyjobs migrate {url} and check again",
            )
        ]
    if not os.path.exists(path):
        findings.append(
            failed(
                "database",
                f"no such database: {path}",
                f"create it with: tinyjobs migrate {url} (tinyjobs also creates it, in WAL mode, "
                "when it first opens it); then check again",
            )
        )
        findings += [not_checked(s, "no database file") for s in ("journal_mode", "synchronous")]
    else:
        findings += _pragma_findings(path, query)
    return findings + _filesystem_findings(path)


def _option_findings(query: dict[str, str]) -> list[Finding]:
    out = []
    for name, bad in _UNSAFE_OPTIONS.items():
        value = query.get(name, "").lower()
        if value in bad:
            out.append(failed(f"?{name}", value, f"remove ?{name}={value}: it defeats durability"))
    return out


def _connect(path: str) -> sqlite3.Connection:
    uri = f"file:{quote(path)}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0, isolation_level=None)
        conn.execute("PRAGMA schema_version").fetchone()
        return conn
    except sqlite3.DatabaseError as err:
        raise StoreUnavailable(f"cannot open SQLite database {path} read-only: {err}") from None


def _pragma_findings(path: str, query: dict[str, str]) -> list[Finding]:
    conn = _connect(path)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0].lower()
        plain = conn.execute("PRAGMA synchronous").fetchone()[0]
        own = _own_synchronous(conn, query)
    except sqlite3.DatabaseError as err:
        raise StoreUnavailable(f"cannot read SQLite database {path}: {err}") from None
    finally:
        conn.close()
    if mode == "wal":
        journal = passed("journal_mode", "wal")
    else:
        journal = failed(
            "journal_mode",
            mode,
            "PRAGMA journal_mode=WAL once on the file (it is persistent), or let tinyjobs "
            "create the database",
        )
    return [journal, *_synchronous_findings(own, plain, query)]


def _own_synchronous(conn: sqlite3.Connection, query: dict[str, str]) -> int:
    """synchronous as tinyjobs' connections open it: FULL, or ?synchronous=normal. Set on our
    own read-only connection only (the setting is per connection, never stored in the file)."""
    wanted = query.get("synchronous", "full").lower()
    if wanted not in _OWN_LEVELS:
        raise ConfigError(f"?synchronous={wanted!r} is not a level; use full (the default) or normal")
    conn.execute(f"PRAGMA synchronous={_OWN_LEVELS[wanted]}")
    return conn.execute("PRAGMA synchronous").fetchone()[0]


def _synchronous_findings(own: int, plain: int, query: dict[str, str]) -> list[Finding]:
    level = LEVELS.get(own, str(own))
    seen = f"{level} on tinyjobs' connections" + (
        f" (?synchronous={query['synchronous']})" if "synchronous" in query else " (default)"
    )
    if own == 0:
        out = failed("synchronous", seen, "remove ?synchronous=off: tinyjobs opens FULL")
    elif own == 1:
        out = warned(
            "synchronous",
            seen + ": survives a process crash, not a power loss",
            "remove ?synchronous=normal to open FULL (survives power loss too)",
        )
    else:
        out = passed("synchronous", seen)
    plain_level = LEVELS.get(plain, str(plain))
    plain_seen = f"{plain_level} on a plain connection (this SQLite's default)"
    remedy = (
        "jobs enqueued with conn= on your own connection commit under its setting: "
        "run PRAGMA synchronous=FULL on it"
    )
    plain_finding = passed("synchronous (plain)", plain_seen)
    if plain < 2:
        plain_finding = warned("synchronous (plain)", plain_seen, remedy)
    return [out, plain_finding]


def _filesystem_findings(path: str) -> list[Finding]:
    mounts = fs.read_mounts()
    out = [_fstype_finding(path, mounts), _mount_point_finding(path, mounts)]
    return out + [_space_finding(path)]


def _fstype_finding(path: str, mounts: list[fs.Mount]) -> Finding:
    if not mounts:
        return not_checked("filesystem", "/proc/self/mountinfo is not readable here")
    mount = fs.mount_of(path, mounts)
    if mount is None:
        return not_checked("filesystem", f"no mount in /proc/self/mountinfo holds {path}")
    verdict, why = fs.classify(mount)
    seen = f"{mount.fstype} at {mount.mount_point}: {why}"
    remedies = {
        "network": "put the database on a local disk (SQLite's locking and WAL need one host)",
        "ram": "put the database on a persistent local disk",
        "layer": "put the database on a volume, not the container's writable layer",
        "volatile": "remount without volatile, or use a volume",
    }
    if verdict in remedies:
        return failed("filesystem", seen, remedies[verdict])
    if verdict == "ephemeral":
        return warned("filesystem", seen, "use a PersistentVolume")
    return passed("filesystem", seen)


def _mount_point_finding(path: str, mounts: list[fs.Mount]) -> Finding:
    if not mounts:
        return not_checked("mount point", "/proc/self/mountinfo is not readable here")
    stranded = [p for p in (path, path + "-wal", path + "-shm") if fs.is_mount_point(p, mounts)]
    if stranded:
        return failed(
            "mount point",
            f"{', '.join(stranded)} is itself a mount point: the -wal and -shm files beside it "
            "are not on the mounted filesystem",
            "mount the directory that holds the database, not the file",
        )
    return passed("mount point", "the database file is not itself a mount point")


def _space_finding(path: str) -> Finding:
    try:
        free = fs.free_bytes(path)
        ro = fs.read_only(path)
    except OSError as err:
        return not_checked("free space", f"statvfs failed: {err}")
    seen = f"{free / 2**20:.0f} MB free"
    if ro:
        return failed("free space", seen + " on a read-only mount", "mount it read-write")
    if free < MIN_FREE:
        return failed("free space", seen + " (under 64 MB)", "free disk space or grow the disk")
    return passed("free space", seen)
