"""The Redis store's clients tell the server redis-py's version without asking
importlib.metadata for it at each client (a worker makes three or four as it starts)."""

from __future__ import annotations

import redis
import redis.utils

from tinyjobs.stores.redis.connection import Connection


def test_a_client_is_made_without_looking_the_version_up(monkeypatch):
    def looked_up() -> str:
        raise AssertionError("redis-py looked its version up")

    monkeypatch.setattr(redis.utils, "get_lib_version", looked_up)
    client = Connection("redis://127.0.0.1:1/0")._make(socket_timeout=1.0, single=False)
    connection = client.connection_pool.make_connection()  # made, not connected
    info = getattr(connection, "driver_info", None)  # redis-py 8; older ones keep lib_version
    assert (info.lib_version if info is not None else connection.lib_version) == redis.__version__
