"""Server instructions per job of the worker's cycle at a low rate, as each
tree runs it: base = enqueue, wait's due-time pipeline, claim, settle, claim (settle_then_claim),
claim (the loop's turn); new = enqueue, claim, settle_and_claim (one script), with no handovers
(the store never waited); hand = the same calls once the store has waited on the queue, as a
worker's store does: settle_and_claim's claim, finding nothing, registers the worker, the enqueue
hands its job over to it, and the claim returns that job. 1,000 done jobs first.

    valgrind --tool=callgrind --toggle-collect=readQueryFromClient \
        --callgrind-out-file=/tmp/cg/callgrind.out.%p redis-server --port 6394 --appendonly yes
    python benchmarks/redis_instructions.py "redis://127.0.0.1:6394/3?timeout=60" 150 new|base|hand
(base: run it with main's tree; the callgrind output directory is CG_DIR, default /tmp/cg)"""

import glob
import os
import statistics
import subprocess
import sys

import redis

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.redis import RedisStore

url, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = redis.Redis.from_url(url.split("?")[0])
r.flushdb()
store = RedisStore(url)
pol = {"default": QueuePolicy("default", lease=60.0)}
h = Holder.current()
pid = int(r.info("server")["process_id"])
CG = os.environ.get("CG_DIR", "/tmp/cg")


def dump():
    subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True, check=True)
    fs = sorted(glob.glob(f"{CG}/callgrind.out.{pid}.*"), key=lambda f: int(f.rsplit(".", 1)[1]))
    for line in open(fs[-1]):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])


for b in range(10):
    store.enqueue([NewJob(id=f"p{b}-{i}", task="t", payload='{"i": 1}') for i in range(100)])
    c = store.claim(pol, h, 100)
    store.settle([Settlement(x.job.id, x.token, "done", result="null") for x in c])


if mode == "hand":  # a worker's store: it waits on its queues, its empty claims register it
    store.wait(["default"], 0.01)
    store.claim(pol, h, 8)


def nj(i):
    return NewJob(id=f"j{i}", task="t", payload=f'{{"i": {i}}}')


PARTS = ("enqueue", "wait", "claim", "settle(+claim)", "claim (loop turn)")
parts: dict[str, list[int]] = {k: [] for k in PARTS}
for i in range(n):
    dump()
    store.enqueue([nj(i)])
    parts["enqueue"].append(dump())
    if mode != "base":  # the worker's blocking pop, woken by the enqueue (a handover's token)
        store.wait(["default"], 1.0)
        parts["wait"].append(dump())
    if mode == "base":
        store._until_next_due(["default"])
        parts["wait"].append(dump())
    c = store.claim(pol, h, 8)
    parts["claim"].append(dump())
    store.settle_and_claim([Settlement(c[0].job.id, c[0].token, "done", result="null")], pol, h, 8)
    parts["settle(+claim)"].append(dump())
    if mode == "base":
        store.claim(pol, h, 8)
        parts["claim (loop turn)"].append(dump())
# Medians: Lua's incremental GC steps in every 50th script run, which a mean spreads over all.
medians = {k: statistics.median(v) for k, v in parts.items() if v}
print(
    mode,
    " ".join(f"{k} {v / 1000:.0f}k;" for k, v in medians.items()),
    f"total {sum(medians.values()) / 1000:.0f}k instructions per job (medians of {n});",
    f"means total {sum(sum(v) for v in parts.values()) / n / 1000:.0f}k",
)
