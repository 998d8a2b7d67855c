"""Opening SQLite connections the one safe way, per thread, never across fork.

Every connection: WAL (checked), `synchronous=FULL` unless the URL asks for NORMAL, a busy
timeout, and `isolation_level=None` so that the store issues `BEGIN IMMEDIATE` itself: a write
transaction that starts immediate never fails half-way with SQLITE_BUSY
(https://www.sqlite.org/lang_transaction.html, "Read transactions versus write transactions").
Connections are per thread, and a connection opened before a fork is abandoned in the child,
never used nor closed there (closing it would release the parent's POSIX locks).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources

from tinyjobs.errors import ConfigError, StoreUnavailable
from tinyjobs.urls import mask, split

MIN_SQLITE = (3, 35, 0)  # UPDATE ... RETURNING
BUSY_TIMEOUT = 5.0
BUSY_ON = f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}"
BUSY_OFF = "PRAGMA busy_timeout=0"
SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
# The page size of a file this store creates. Each commit writes every page it changed as a
# whole WAL frame (checksummed, then synced), and a worker reads every page it touches again
# after another process's commit: a job's ~14 pages cost a quarter of the bytes at 1 KiB than at
# SQLite's default 4 KiB. Measured (docs/measured.md, sqlite-pages): they pay for the jobs_state
# index's writes, which alone cost a lone job 10-20 %; with both, the job path is level. Set on
# every connection before WAL: only the first write to an empty file fixes it, and an existing
# file keeps its own (docs/stores.md says how to convert one). Rows longer than ~900 bytes
# spill into overflow pages, which is correct, only slower.
PAGE_SIZE = 1024


@dataclass(frozen=True)
class Target:
    """What a sqlite URL names: the absolute file path and the synchronous level."""

    url: str
    path: str
    synchronous: str = "FULL"


def parse_url(url: str, **options: object) -> Target:
    """The file and settings a `sqlite:///rel.db` or `sqlite:////abs.db` URL names.

    ConfigError (naming the culprit, URL masked) for an in-memory database, a host part, an
    unknown query option or an unknown `synchronous` value."""
    scheme, netloc, path, query = split(url)
    shown = mask(url)
    if scheme != "sqlite":
        raise ConfigError(f"store URL {shown!r} is not a sqlite:// URL")
    if netloc:
        raise ConfigError(
            f"store URL {shown!r}: sqlite URLs have no host part "
            f"({netloc.rpartition('@')[2]!r}); use sqlite:///rel.db "
            "for a relative path or sqlite:////abs/path.db for an absolute one"
        )
    for name, value in options.items():
        query.setdefault(name, str(value))
    if query.get("mode") == "memory" or ":memory:" in path:
        raise ConfigError(
            f"store URL {shown!r}: an in-memory SQLite database cannot hold jobs across processes "
            "or restarts; use a file (sqlite:///tinyjobs.db) or memory:// for tests"
        )
    unknown = sorted(set(query) - {"synchronous"})
    if unknown:
        raise ConfigError(
            f"store URL {shown!r}: unknown option {', '.join(unknown)}; the only option is "
            "synchronous=full|normal"
        )
    level = query.get("synchronous", "full").lower()
    if level not in SYNCHRONOUS:
        raise ConfigError(
            f"store URL {shown!r}: synchronous={query['synchronous']!r} is not allowed; "
            "use synchronous=full (the default, survives power loss) or synchronous=normal"
        )
    relative = path[1:] if path.startswith("/") else path
    if not relative:
        raise ConfigError(f"store URL {shown!r} names no file; use sqlite:///tinyjobs.db")
    return Target(url, os.path.abspath(relative), SYNCHRONOUS[level])


def check_writable(target: Target) -> None:
    """StoreUnavailable with a clear message when the file or its directory cannot be written:
    SQLite creates `-wal` and `-shm` beside the file, so the directory must be writable too."""
    folder = os.path.dirname(target.path)
    shown = mask(target.url)
    if not os.path.isdir(folder):
        raise StoreUnavailable(
            f"sqlite store {shown!r}: directory {folder!r} does not exist or is not a directory"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreUnavailable(
            f"sqlite store {shown!r}: directory {folder!r} is not writable; SQLite needs to "
            "create the -wal and -shm files beside the database"
        )
    if os.path.exists(target.path) and not os.access(target.path, os.R_OK | os.W_OK):
        raise StoreUnavailable(f"sqlite store {shown!r}: file {target.path!r} is not writable")


def connect(target: Target) -> sqlite3.Connection:
    """A new connection with WAL, the synchronous level, busy timeout and foreign keys off;
    a file it creates gets PAGE_SIZE pages."""
    try:
        conn = sqlite3.connect(
            target.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as err:
        raise StoreUnavailable(f"sqlite store {mask(target.url)!r}: cannot open: {err}") from None
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a constant; a no-op on an existing file
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreUnavailable(
                f"sqlite store {mask(target.url)!r}: journal_mode stayed {mode!r}, WAL is required"
            )
        conn.execute(f"PRAGMA synchronous={target.synchronous}")  # one of two constants
        conn.execute(BUSY_OFF)  # begin_immediate waits instead; snapshot() turns it on
    except sqlite3.Error as err:
        conn.close()
        raise StoreUnavailable(f"sqlite store {mask(target.url)!r}: cannot open: {err}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def is_busy(err: sqlite3.Error) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == sqlite3.SQLITE_BUSY) or "locked" in str(err)


def begin_immediate(
    conn: sqlite3.Connection, url: str, pause_for: Callable[[float], None] = time.sleep
) -> None:
    """Take the write lock, waiting up to BUSY_TIMEOUT.

    Our connections keep `busy_timeout=0` outside reads and we wait here instead, polling
    every fraction of a millisecond: SQLite's own busy handler backs off to 100 ms sleeps,
    and against another process that writes in a tight loop (a busy worker) it starves for
    seconds and then fails with "database is locked". `pause_for(seconds)` is the wait
    between two tries; the store's returns early when another writer commits (its unlock
    bell), so that the lock passes on at once instead of after a sleep."""
    deadline = 0.0
    pause = 0.0001
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as err:
            if not is_busy(err):
                raise StoreUnavailable(f"sqlite store {mask(url)!r}: {err}") from None
            now = time.monotonic()
            deadline = deadline or now + BUSY_TIMEOUT
            if now >= deadline:
                raise StoreUnavailable(
                    f"sqlite store {mask(url)!r}: the database stayed locked by another "
                    f"connection for {BUSY_TIMEOUT:g} s"
                ) from None
        # Jitter, so that two waiters do not wake in step.
        pause_for(random.uniform(pause / 2, pause))
        pause = min(pause * 2, 0.002)


@contextmanager
def immediate(conn: sqlite3.Connection, url: str) -> Iterator[sqlite3.Connection]:
    """One write transaction: BEGIN IMMEDIATE takes the write lock first, so nothing inside
    fails with SQLITE_BUSY; COMMIT on success, ROLLBACK otherwise."""
    begin_immediate(conn, url)
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction, with SQLite's busy timeout (a reader in WAL mode is only kept
    waiting in rare cases such as recovery after a crash)."""
    conn.execute(BUSY_ON)
    try:
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")
    finally:
        conn.execute(BUSY_OFF)


def load_blocks(filename: str, marker: str) -> dict[str, str]:
    """The `-- <marker>: <name>` blocks of a SQL file in this package, name -> SQL text."""
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    blocks: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    prefix = f"-- {marker}:"
    for line in text.splitlines():
        if line.startswith(prefix):
            if name is not None:
                blocks[name] = "\n".join(lines).strip()
            name, lines = line[len(prefix) :].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        blocks[name] = "\n".join(lines).strip()
    return blocks


def statements(script: str) -> list[str]:
    """A script cut into statements. (executescript would COMMIT our open transaction first.)"""
    out: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current.strip())
            current = ""
    if current.strip() and not all(part.strip().startswith("--") for part in current.strip().splitlines()):
        out.append(current.strip())
    return out


def migrate(conn: sqlite3.Connection, url: str) -> int:
    """Apply the migrations of schema.sql that this file lacks; returns the version now.

    Idempotent, and safe when several processes open the file at once: the version is read
    and the migrations run inside one BEGIN IMMEDIATE transaction."""
    migrations = {int(k): v for k, v in load_blocks("schema.sql", "migration").items()}
    with immediate(conn, url):
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        current = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
        for version in sorted(v for v in migrations if v > current):
            for statement in statements(migrations[version]):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
            current = version
    return current


def check_version() -> None:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StoreUnavailable(
            f"SQLite {sqlite3.sqlite_version} is too old: tinyjobs needs 3.35 or later (UPDATE ... RETURNING)"
        )
