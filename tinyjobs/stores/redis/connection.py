"""Connections to Redis: URL parsing, the clients, fork safety and retries.

No connection crosses a fork: the pid that built the clients is recorded, and a call from any
other process builds fresh clients first (the inherited sockets are dropped unused; redis-py
only shuts a socket down in the process that opened it). Connection errors are retried with
backoff when the call is safe to repeat, or when the command never reached the server."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

try:
    from redis.driver_info import DriverInfo
except ImportError:  # redis-py before driver_info: lib_version alone
    DriverInfo = None  # type: ignore[assignment,misc]

from ...durations import parse_duration
from ...errors import ConfigError, StoreUnavailable
from ...urls import mask, split, with_query
from ..deadlines import CONNECT, ROUND_TRIP, retry_window

T = TypeVar("T")

_pack_command: Callable[[tuple[Any, ...]], bytes] | None
try:  # redis-py's own packer makes a tuple of the arguments and checks each before this call
    from hiredis import pack_command as _pack_command
except ImportError:  # redis-py without hiredis: its pure-Python packer
    _pack_command = None

DEFAULT_PREFIX = "tinyjobs"
SCHEMES = ("redis", "rediss", "unix")
RETRY_FOR = 15.0  # seconds a safe call keeps retrying while the server is down or loading
# The blocking client's socket timeout: longer than any blocking pop (wait() caps those at
# BLOCK_AT_MOST), so that only a stalled connection ever reaches it.
BLOCK_AT_MOST = 30.0


def parse(url: str, options: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(client URL without our options, key prefix, client keyword options); ConfigError when
    the URL or the prefix makes no sense."""
    scheme, _netloc, path, query = split(url)
    if scheme not in SCHEMES:
        raise ConfigError(f"store URL {mask(url)!r}: a Redis URL starts with redis://, rediss:// or unix://")
    database(url)
    prefix = str(options.pop("prefix", query.pop("prefix", DEFAULT_PREFIX)))
    if "timeout" in query:  # ours, as on PostgreSQL: the deadline of one round trip
        options["socket_timeout"] = parse_duration(query.pop("timeout"), f"store URL {mask(url)!r}: timeout")
    if not prefix or any(c in prefix for c in "{}\t\n "):
        raise ConfigError(
            f"store URL {mask(url)!r}: prefix {prefix!r} must be non-empty, without braces or spaces"
        )
    client_url = url.split("?", 1)[0]
    if query:
        client_url = with_query(client_url, **query)
    return client_url, prefix, options


def database(url: str) -> int:
    """The database index a Redis URL names (its path, else `?db=`, else 0); ConfigError when it
    is not a whole number (redis-py would silently use 0)."""
    scheme, _netloc, path, query = split(url)
    text = query.get("db", "") if scheme == "unix" else (path.strip("/") or query.get("db", ""))
    if text == "":
        return 0
    if not text.isdigit():
        raise ConfigError(
            f"store URL {mask(url)!r}: the database must be a number such as redis://host:6379/0, "
            f"got {text!r}"
        )
    return int(text)


def no_such_database(url: str, err: Exception) -> ConfigError | None:
    """A ConfigError naming the database when `err` says the server has no such index."""
    if "DB index is out of range" not in str(err):
        return None
    return ConfigError(
        f"store URL {mask(url)!r}: the server has no database {database(url)} (its `databases` "
        "setting allows fewer; the default is 16: 0 to 15)"
    )


def _client_version() -> dict[str, Any]:
    """redis-py's version for CLIENT SETINFO, given, so that redis-py does not look it up in the
    installed distributions (importlib.metadata, ~1-3 ms) for every connection it makes: a
    worker makes three or four as it starts, one on the way to its first claim."""
    if DriverInfo is None:
        return {"lib_version": redis.__version__}  # redis-py before driver_info
    return {"driver_info": DriverInfo(lib_version=redis.__version__)}


class Connection:
    """The clients of one store: a command client per thread (one connection each, which spares
    the pool's checks on every call), and a blocking client per thread for wait() (likewise:
    the one thread that waits, a worker's store watcher, pops on a connection of its own)."""

    def __init__(self, url: str, **options: Any) -> None:
        self.masked = mask(url)
        self.url = url
        self.client_url, self.prefix, self.options = parse(url, dict(options))
        self.round_trip = float(self.options.pop("socket_timeout", ROUND_TRIP))
        self._lock = threading.Lock()
        self._pid = -1
        self._build()

    def _make(self, socket_timeout: float | None, single: bool) -> redis.Redis:
        settings: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": CONNECT,
            "socket_timeout": socket_timeout,
            "health_check_interval": 30,
            "retry": Retry(NoBackoff(), 0),  # we retry ourselves, only where it is safe
            "single_connection_client": single,
            **_client_version(),
        }
        settings.update(self.options)
        try:
            return redis.Redis.from_url(self.client_url, **settings)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"store URL {self.masked!r}: {err}") from None
        except redis.ResponseError as err:  # a single-connection client connects at once
            refused = no_such_database(self.url, err)
            if refused is None:
                raise
            raise refused from None

    def _build(self) -> None:
        self._local = threading.local()
        self._clients: list[redis.Redis] = []
        self._sender: redis.Redis | None = None  # send_only's client, shared by the threads
        self._send_lock = threading.Lock()
        self._unread = 0  # replies of send_only's commands not read yet
        self._pid = os.getpid()

    def client(self) -> redis.Redis:
        """The command client of this thread in this process (rebuilt after a fork)."""
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._build()
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._make(self.round_trip, single=True)
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def blocking(self) -> redis.Redis:
        """The blocking client of this thread in this process (rebuilt after a fork): its socket
        timeout outlasts any blocking pop (BLOCK_AT_MOST)."""
        self.client()
        client = getattr(self._local, "blocking", None)
        if client is None:
            client = self._make(BLOCK_AT_MOST + self.round_trip, single=True)
            self._local.blocking = client
            with self._lock:
                self._clients.append(client)
        return client

    def send_only(self, args: list[Any]) -> None:
        """Send one command without waiting for its reply, on a connection of its own (one per
        process, its threads taking turns): the caller goes on at once, the command is on its
        way to the server (in the kernel's buffer: a process that dies next still sends it).
        The replies of earlier ones, long arrived, are read before; an error reply is ignored
        (the command must be one whose failure the caller can live with). A connection error
        raises redis.ConnectionError / TimeoutError, as a call would."""
        self.client()  # rebuilt after a fork
        with self._send_lock:
            sender = self._sender
            if sender is None:
                sender = self._sender = self._make(self.round_trip, single=True)
                with self._lock:
                    self._clients.append(sender)
            conn = sender.connection
            assert conn is not None  # a single-connection client has its connection from the start
            try:
                while self._unread:
                    self._unread -= 1
                    try:
                        conn.read_response()
                    except redis.ResponseError:
                        pass
                conn.send_packed_command(conn.pack_command(*args))
            except (redis.ConnectionError, redis.TimeoutError):
                self._unread = 0  # redis-py dropped the socket: nothing more to read on it
                raise
            self._unread += 1

    def unavailable(self, err: Exception) -> StoreUnavailable:
        return StoreUnavailable(f"Redis store {self.masked} is unreachable: {mask(str(err))}")

    def call(self, fn: Callable[[redis.Redis], T], safe: bool = True) -> T:
        """Run `fn(client)`; on a connection error retry with backoff for up to RETRY_FOR
        seconds when `safe` (repeating it does no harm) or when nothing reached the server."""
        deadline = time.monotonic() + retry_window(RETRY_FOR)
        delay = 0.02
        while True:
            try:
                return fn(self.client())
            except redis.ResponseError as err:
                refused = no_such_database(self.url, err)
                if refused is None:
                    raise
                raise refused from None
            except (redis.ConnectionError, redis.TimeoutError) as err:
                repeatable = safe or _never_sent(err)
                if not repeatable or time.monotonic() + delay > deadline:
                    raise self.unavailable(err) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def close(self) -> None:
        if self._pid == os.getpid():
            with self._lock:
                for client in self._clients:
                    client.close()
        self._pid = -2  # a later call builds fresh clients; the store is not meant to be reused


def execute(client: redis.Redis, args: list[Any]) -> Any:
    """One command on `client` and its reply, as `client.execute_command(*args)` gives them.

    On a client of our own (one connection, one thread: Connection.client) the command goes
    straight down its connection: packed, sent (with redis-py's health check when due) and the
    reply read, where execute_command went through the lock, the retry wrapper (which we set to
    no retries), the response callbacks (none for FCALL or EVALSHA) and the metrics hooks:
    about 5 µs of the client's CPU per call, an eighth of a single enqueue. An error leaves the
    connection as execute_command would (redis-py's connection drops its socket on a network
    error; the next call connects again), and a reply that is an error is raised. Any other
    client, or a connection that redis-py wants reconnected (a server's maintenance notice,
    redis-py 8), takes execute_command."""
    conn = client.connection
    if conn is None or getattr(conn, "should_reconnect", _no)():
        return client.execute_command(*args)
    # Our arguments are str, int and float, which hiredis packs as redis-py does (UTF-8, repr).
    packed = conn.pack_command(*args) if _pack_command is None else [_pack_command(tuple(args))]
    conn.send_packed_command(packed)
    return conn.read_response()


def _no() -> bool:
    return False


def decoded(reply: bytes | str) -> str:
    """One reply of our clients as the str it is: they are made with decode_responses=True,
    which redis-py's types cannot know (they say bytes | str)."""
    return reply if isinstance(reply, str) else reply.decode()


def _never_sent(err: Exception) -> bool:
    """True for errors raised before a whole command reached the server: connecting, writing,
    or the server still loading its data."""
    text = str(err)
    return isinstance(err, redis.BusyLoadingError) or "connecting to" in text or "writing to socket" in text
