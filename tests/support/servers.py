"""Throw-away real servers on free loopback ports, for tests that need a store configured in a
particular (often deliberately wrong) way.

    with redis_server(tmp_path, "--appendonly", "no") as server:
        server.url, server.port, server.restart(), server.stop()

    with postgres_server(tmp_path, {"fsync": "off"}) as server:
        server.url, server.restart(), server.stop()
        with postgres_standby(server, tmp_path) as standby: ...

Every wait has a deadline. PostgreSQL refuses to run as root: when the tests run as root, its
data directory lives in a fresh directory under the system temp dir (pytest's tmp_path is
private to root) owned by the `postgres` OS user, and initdb/pg_ctl run as that user."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from support.wait import wait_until

START_TIMEOUT = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- Redis -----------------------------------------------------------------------------------


def _redis_ready(port: int) -> bool:
    """True when the server answers an inline PING (a NOAUTH refusal counts: it is up)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH", b"-ERR AUTH", b"-NOPERM"))


class RedisServer:
    """A redis-server process of our own. `url` carries the password of --requirepass, if any."""

    def __init__(self, directory: Path, args: Sequence[str]) -> None:
        self.dir = directory
        self.args = list(args)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        password = _arg_value(self.args, "--requirepass")
        auth = f":{password}@" if password else ""
        self.url = f"redis://{auth}127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        base = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        base += ["--dir", str(self.dir), "--daemonize", "no", "--logfile", "redis.log"]
        if "--save" not in self.args:
            base += ["--save", ""]
        return base + self.args

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(
            lambda: _redis_ready(self.port),
            START_TIMEOUT,
            what=f"redis-server on port {self.port} (log: {self.dir / 'redis.log'})",
            alive=lambda: self.proc.poll() is None,
        )

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server (SIGTERM: a clean shutdown; pass SIGKILL for a crash)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=START_TIMEOUT)

    def restart(self, sig: int = signal.SIGTERM) -> None:
        """Stop and start again on the same port, directory and arguments."""
        self.stop(sig)
        self.start()


def _arg_value(args: Sequence[str], name: str) -> str | None:
    for index, arg in enumerate(args[:-1]):
        if arg == name:
            return args[index + 1]
    return None


@contextmanager
def redis_server(
    tmp_path: Path, *extra_args: str, server_class: type[RedisServer] = RedisServer
) -> Iterator[RedisServer]:
    """A redis-server on a free loopback port, its files in tmp_path, `--save ""` unless
    extra_args give --save. Stopped (and its port freed) on exit. `server_class` may override
    `command()` (to start it inside a mount namespace, say)."""
    directory = Path(tmp_path) / f"redis-{os.urandom(3).hex()}"
    directory.mkdir(parents=True)
    for attempt in range(3):
        server = server_class(directory, extra_args)
        try:
            server.start()
            break
        except AssertionError:
            server.stop(signal.SIGKILL)
            if attempt == 2:
                raise
    try:
        yield server
    finally:
        server.stop(signal.SIGKILL)


# --- PostgreSQL ------------------------------------------------------------------------------

PG_USER = "postgres"


def _as_pg_user(cmd: list[str]) -> list[str]:
    """`cmd` run as the postgres OS user when we are root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", PG_USER, "--", *cmd]


def _run(cmd: list[str], timeout: float = START_TIMEOUT) -> None:
    result = subprocess.run(_as_pg_user(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr}")


def _pg_base_dir(tmp_path: Path) -> tuple[Path, bool]:
    """A directory the postgres user may own; (path, must_remove_afterwards)."""
    if os.geteuid() != 0:
        directory = Path(tmp_path) / f"pg-{os.urandom(3).hex()}"
        directory.mkdir(parents=True)
        return directory, False
    directory = Path(tempfile.mkdtemp(prefix="tinyjobs-pg-"))
    entry = pwd.getpwnam(PG_USER)
    os.chown(directory, entry.pw_uid, entry.pw_gid)
    return directory, True


def _pg_ready(port: int) -> bool:
    import psycopg

    try:
        with psycopg.connect(f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres", connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


class PostgresServer:
    """A PostgreSQL cluster of our own: `url` names its `postgres` database as user postgres."""

    def __init__(self, base: Path, name: str, settings: dict[str, object]) -> None:
        self.base = base
        self.data = base / name
        self.port = free_port()
        self.settings = {"fsync": "off", **{k: str(v) for k, v in settings.items()}}
        self.url = f"postgresql://{PG_USER}@127.0.0.1:{self.port}/postgres"

    def options(self) -> str:
        opts = [f"-p {self.port}", f"-k {self.base}", "-c listen_addresses=127.0.0.1"]
        opts += [f"-c {key}={value}" for key, value in self.settings.items()]
        return " ".join(opts)

    def start(self) -> None:
        log = self.base / f"{self.data.name}.log"
        _run(["pg_ctl", "-D", str(self.data), "-l", str(log), "-o", self.options(), "-W", "start"])
        wait_until(lambda: _pg_ready(self.port), START_TIMEOUT, what=f"PostgreSQL ({log})")

    def stop(self, mode: str = "immediate") -> None:
        """pg_ctl stop; mode 'fast' for a clean shutdown, 'immediate' for a crash-like one."""
        if (self.data / "postmaster.pid").exists():
            _run(["pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop"])

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()


@contextmanager
def postgres_server(tmp_path: Path, settings: dict[str, object] | None = None):
    """A fresh cluster (initdb -A trust -U postgres) on a free loopback port, with `-c` settings
    (fsync=off unless settings say otherwise). Stopped and removed on exit."""
    base, remove = _pg_base_dir(tmp_path)
    server = PostgresServer(base, "primary", settings or {})
    try:
        _run(
            ["initdb", "-A", "trust", "-U", PG_USER, "-N", "-E", "UTF8", "--locale=C"]
            + ["-D", str(server.data)],
            timeout=120,
        )
        server.start()
        yield server
    finally:
        server.stop()
        if remove:
            shutil.rmtree(base, ignore_errors=True)


@contextmanager
def postgres_standby(primary: PostgresServer, settings: dict[str, object] | None = None):
    """A streaming standby of `primary` (pg_basebackup -R), on its own free port."""
    standby = PostgresServer(primary.base, f"standby-{os.urandom(3).hex()}", settings or {})
    _run(
        ["pg_basebackup", "-D", str(standby.data), "-R", "-X", "stream", "-c", "fast"]
        + ["-h", "127.0.0.1", "-p", str(primary.port), "-U", PG_USER],
        timeout=120,
    )
    try:
        standby.start()
        yield standby
    finally:
        standby.stop()
