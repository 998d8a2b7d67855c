"""The Lua scripts: one file per atomic operation, each prepended with _lib.lua, read once via
importlib.resources and called by SHA; on NOSCRIPT (a server restart, SCRIPT FLUSH) the script is
loaded again and the call repeated, which is safe since NOSCRIPT means it did not run. Plain
EVALSHA through execute_command: redis-py's Script object does the same with more overhead per
call."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.resources import files
from typing import Any

import redis
from redis.exceptions import NoScriptError

OPERATIONS = (
    "enqueue",
    "claim",
    "renew",
    "save_step",
    "settle",
    "reap",
    "end_leases",
    "cancel",
    "retry",
    "get",
    "jobs",
    "counts",
    "purge",
    "fire_cron",
    "lead",
    "resign",
)


@cache
def source(name: str) -> str:
    """The full text of one operation's script: the shared helpers, then the operation."""
    here = files(__package__)
    return here.joinpath("_lib.lua").read_text() + "\n" + here.joinpath(f"{name}.lua").read_text()


class Scripts:
    """Every operation's SHA, computed once; run with the client of the current process."""

    def __init__(self, seq_key: str) -> None:
        self._sha = {name: hashlib.sha1(source(name).encode()).hexdigest() for name in OPERATIONS}
        self._key = seq_key

    def command(self, name: str, args: list[Any]) -> list[Any]:
        """The EVALSHA command that runs operation `name` with `args`."""
        return ["EVALSHA", self._sha[name], 1, self._key, *args]

    def run(self, client: redis.Redis, name: str, args: list[Any]) -> Any:
        try:
            return client.execute_command(*self.command(name, args))
        except NoScriptError:
            client.script_load(source(name))
            return client.execute_command(*self.command(name, args))

    async def arun(self, client: Any, name: str, args: list[Any]) -> Any:
        """`run` on a redis.asyncio client."""
        try:
            return await client.execute_command(*self.command(name, args))
        except NoScriptError:
            await client.script_load(source(name))
            return await client.execute_command(*self.command(name, args))
