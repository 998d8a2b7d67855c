"""Redis store cost against store size: fill to 10^4, 10^5, 10^6 jobs (1/2 waiting in the worker's
queue, 1/4 scheduled a year out, 1/4 done with an execution each), then measure at each size the
worker's cycle (claim 8 + settle 8 from the waiting backlog: server CPU per job from INFO, and wall),
a single enqueue, get, and jobs('waiting', limit=20).
usage: python benchmarks/redis_scale.py URL [max_exp [first_exp --keep]] (--keep: measure a store
already filled to 10^first_exp by an earlier run)"""

import sys
import time

import redis

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.redis import RedisStore

url = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 6
r = redis.Redis.from_url(url)
if "--keep" not in sys.argv:
    r.flushdb() if "--keep" not in sys.argv else None
store = RedisStore(url)
h = Holder.current()
pol = {"default": QueuePolicy("default", lease=60.0)}
fillpol = {"fill": QueuePolicy("fill", lease=60.0)}


def srv():
    i = r.info("cpu")
    return i["used_cpu_user"] + i["used_cpu_sys"]


size = 0


def fill(to):
    global size
    n = to - size
    for part, (q, delay, frac) in enumerate([("default", 0.0, 2), ("default", 3.15e7, 4), ("fill", 0.0, 4)]):
        m = n // frac
        for b in range(0, m, 1000):
            store.enqueue(
                [
                    NewJob(id=f"f{size}-{part}-{i}", task="t", queue=q, payload='{"x": 1}', delay=delay)
                    for i in range(b, min(m, b + 1000))
                ]
            )
    while True:
        c = store.claim(fillpol, h, 1000)
        if not c:
            break
        store.settle([Settlement(x.job.id, x.token, "done", result="null") for x in c])
    size = to


print(
    "| jobs in store | claim 8 + settle 8: server µs/job | wall jobs/s | enqueue 1: server µs "
    "| wall ms | get ms | jobs(waiting, 20) ms | used_memory MB |"
)
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
first = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 4
size = 10**first if "--keep" in sys.argv else 0
for e in range(first, top + 1):
    fill(10**e)
    n = 4000
    s0, t0 = srv(), time.perf_counter()
    done = 0
    while done < n:
        c = store.claim(pol, h, 8)
        store.settle([Settlement(x.job.id, x.token, "done", result="null") for x in c])
        done += len(c)
    cyc_srv = (srv() - s0) / done * 1e6
    cyc_rate = done / (time.perf_counter() - t0)
    m = 1000
    s0, t0 = srv(), time.perf_counter()
    for i in range(m):
        store.enqueue([NewJob(id=f"e{e}-{i}", task="t", queue="other", payload="{}")])
    enq_srv = (srv() - s0) / m * 1e6
    enq_ms = (time.perf_counter() - t0) / m * 1e3
    t0 = time.perf_counter()
    for i in range(200):
        store.get(f"f0-0-{i + 5000}")
    get_ms = (time.perf_counter() - t0) / 200 * 1e3
    t0 = time.perf_counter()
    try:
        store.jobs("waiting", limit=20)
        jobs_ms = f"{(time.perf_counter() - t0) * 1e3:.1f}"
    except Exception:
        jobs_ms = f"> {(time.perf_counter() - t0) * 1e3:.0f} (timed out)"
    mem = r.info("memory")["used_memory"] / 1e6
    print(
        f"| 10^{e} | {cyc_srv:.0f} | {cyc_rate:,.0f} | {enq_srv:.0f} | {enq_ms:.2f} | {get_ms:.2f} "
        f"| {jobs_ms} | {mem:,.0f} |",
        flush=True,
    )
r.flushdb() if "--keep" not in sys.argv else None
