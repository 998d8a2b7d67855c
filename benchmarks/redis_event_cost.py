"""What one request costs the Redis server at a low rate: its CPU (INFO cpu) per tick while one
client sends a request every 1/--rate seconds, for several kinds of request. Between ticks the
server sleeps, so each request finds its caches cold: this is the cost a job's commands pay at
50 jobs/s, not the cost back to back (which redis_instructions.py counts).

    python benchmarks/redis_event_cost.py --url redis://127.0.0.1:6420/8
    python benchmarks/redis_event_cost.py --url redis://127.0.0.1:6420/8 --kinds ping,enqueue,enqueue_x2

Kinds: ping; lpush (one 300-byte value, huey's enqueue); multi (MULTI/EXEC of six writes: an
HSET of six fields, two ZADDs, INCR, SADD, RPUSH); fone / eone (a function / a script by SHA
that returns 1); fsix / esix (the six writes in a function / a script by SHA); ftwelve (the six
writes twice in one function); enqueue (a tinyjobs single enqueue, nobody waiting);
enqueue_many2 / enqueue_many4 (2 or 4 jobs in one enqueue_many: one script); enqueue_x2 /
enqueue_x4 (2 or 4 single enqueues back to back: as many requests). System is the kernel's part (the
server's syscalls: reading, replying, the AOF's write), user the server's own. The server's idle CPU (its
own timers) is in every figure: `ping` is the floor. Give it a server of its own: every client
of the server counts. It writes keys `rlcost:*` of the URL's database and flushes nothing else
but the tinyjobs keys of that database (the enqueue kinds)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIX = (
    "redis.call('HSET', KEYS[1], 'a', ARGV[1], 'b', ARGV[2], 'c', ARGV[3], 'd', ARGV[4], 'e', ARGV[5], "
    "'f', ARGV[6]); redis.call('ZADD', KEYS[2], ARGV[7], ARGV[8]); redis.call('ZADD', KEYS[3], ARGV[7], "
    "ARGV[8]); redis.call('INCR', KEYS[4]); redis.call('SADD', KEYS[5], ARGV[8]); "
    "redis.call('RPUSH', KEYS[6], ARGV[8]); "
)
LIBRARY = (
    "#!lua name=rlcost\n"
    "redis.register_function('rlcost_one', function(keys, args) return 1 end)\n"
    f"redis.register_function('rlcost_six', function(KEYS, ARGV) {SIX} return 1 end)\n"
    f"redis.register_function('rlcost_twelve', function(KEYS, ARGV) {SIX} {SIX} return 1 end)\n"
)
VALUE = "x" * 300


def kinds(r: redis.Redis, url: str) -> dict[str, Callable[[int], object]]:
    r.function_load(LIBRARY, replace=True)
    sha_one = r.script_load("return 1")
    sha_six = r.script_load(SIX + "return 1")

    def six_args(i: int) -> list[object]:
        keys = [f"rlcost:h{i}", "rlcost:z1", "rlcost:z2", "rlcost:c", "rlcost:s", "rlcost:l2"]
        return [*keys, VALUE, "1", "2", "3", "4", "5", i, f"m{i}"]

    def multi(i: int) -> None:
        p = r.pipeline(transaction=True)
        p.hset(f"rlcost:h{i}", mapping={"a": VALUE, "b": "1", "c": "2", "d": "3", "e": "4", "f": "5"})
        p.zadd("rlcost:z1", {f"m{i}": i})
        p.zadd("rlcost:z2", {f"m{i}": i})
        p.incr("rlcost:c")
        p.sadd("rlcost:s", f"m{i}")
        p.rpush("rlcost:l2", f"m{i}")
        p.execute()

    import tinyjobs

    app = tinyjobs.App(url)

    @app.task
    def noop(run: tinyjobs.Run, i: int) -> None:
        return None

    def repeat(n: int) -> Callable[[int], object]:
        def call(i: int) -> None:
            for _ in range(n):
                noop.enqueue(i=i)

        return call

    return {
        "ping": lambda i: r.ping(),
        "lpush": lambda i: r.lpush("rlcost:l", VALUE),
        "multi": multi,
        "fone": lambda i: r.fcall("rlcost_one", 0),
        "eone": lambda i: r.evalsha(sha_one, 0),
        "fsix": lambda i: r.fcall("rlcost_six", 6, *six_args(i)),
        "esix": lambda i: r.evalsha(sha_six, 6, *six_args(i)),
        "ftwelve": lambda i: r.fcall("rlcost_twelve", 6, *six_args(i)),
        "enqueue": repeat(1),
        "enqueue_many2": lambda i: noop.enqueue_many([{"i": i}] * 2),
        "enqueue_many4": lambda i: noop.enqueue_many([{"i": i}] * 4),
        "enqueue_x2": repeat(2),
        "enqueue_x4": repeat(4),
    }


def server_cpu(r: redis.Redis) -> tuple[float, float]:
    """(system, user) CPU seconds of the server so far."""
    info = r.info("cpu")
    return float(info["used_cpu_sys"]), float(info["used_cpu_user"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="redis://127.0.0.1:6420/8")
    parser.add_argument("--rate", type=float, default=50.0, help="ticks a second")
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument(
        "--kinds",
        default="ping,lpush,multi,fone,eone,fsix,esix,ftwelve,enqueue,"
        "enqueue_many2,enqueue_many4,enqueue_x2,enqueue_x4",
    )
    args = parser.parse_args()
    r = redis.Redis.from_url(args.url)
    table = kinds(r, args.url)
    try:
        for name in args.kinds.split(","):
            send = table[name]
            send(0)  # loads what the kind needs (the tinyjobs functions) before the window
            before = server_cpu(r)
            start = time.monotonic()
            for i in range(args.ticks):
                pause = start + i / args.rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                send(i)
            after = server_cpu(r)
            sys_us, user_us = ((a - b) / args.ticks * 1e6 for a, b in zip(after, before, strict=True))
            print(
                f"{name:<14} server CPU {sys_us + user_us:7.1f} us a tick at {args.rate:g} ticks/s "
                f"(system {sys_us:6.1f}, user {user_us:6.1f})"
            )
    finally:
        for key in r.scan_iter("rlcost:*", count=1000):
            r.delete(key)
        for key in r.scan_iter("{tinyjobs}:*", count=1000):
            r.delete(key)


if __name__ == "__main__":
    main()
