"""The Redis store: every operation is one Lua script, so each is atomic on the server.

Keys of one store all live under `{prefix}:` (one hash slot, Redis Cluster-ready); the layout
is in _lib.lua. With `now=None` the scripts read the server's TIME (CLK-01). Redis has no
transaction shared with the caller's data, so `enqueue(conn=...)` is refused (JOB-02)."""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from ...errors import StoreUnavailable
from ...holder import Holder
from ...job import Job
from ..base import Claimed, LeaseStatus, NewJob, QueuePolicy, Settlement
from . import codec
from .connection import BLOCK_AT_MOST, Connection, execute
from .scripts import Scripts
from .views import RedisViews

UPGRADE_CHUNK = 1000  # P:ended entries one upgrade.lua call moves (about 6 ms of the server's time)


class RedisStore(RedisViews):
    """A store in one Redis database under one key prefix. Thread-safe; fork-safe (each process
    builds its own connections)."""

    capabilities = frozenset({"notify", "shared", "timed", "wakes_one"})

    def __init__(self, url: str, **options: Any) -> None:
        self.url = url
        self._conn = Connection(url, **options)
        self.prefix = self._conn.prefix
        self.base = "{" + self.prefix + "}"
        self._scripts = Scripts(self.base + ":seq")
        # wait(): the next scheduled due time (time.monotonic()) per set of queues, while known.
        self._due_at: dict[tuple[str, ...], float] = {}
        # Who claims from a set of queues and waits on them (handovers: see _hand_flag).
        self._claimers: dict[frozenset[str], _Claimer | None] = {}
        self._claimers_pid = os.getpid()
        try:
            self._conn.client().ping()
        except (redis.ConnectionError, redis.TimeoutError) as err:
            self._conn.close()
            raise self._conn.unavailable(err) from None
        try:
            self._upgrade()
        except BaseException:
            self._conn.close()
            raise

    def _upgrade(self) -> None:
        """Bring keys of an older layout to the current one (_lib.lua), as the SQL stores migrate
        on open. P:durkeys (the (queue, outcome) pairs with execution stats, which P:dursum's
        fields name as well) is read by no script any more: deleted. P:ended (every ended
        execution in one sorted set, members ending in their outcome) is moved into
        P:ended:<outcome> by upgrade.lua, UPGRADE_CHUNK entries per script, so that no script
        holds Redis up for long. Every chunk is atomic and the scripts read and delete in both
        layouts meanwhile, so an upgrade cut short loses nothing and the next open goes on;
        several processes opening at once share the work. A store already in the current layout
        pays one round trip (EXISTS and DEL)."""
        legacy = self.base + ":ended"

        def look(client: redis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            pipe.exists(legacy)
            pipe.delete(self.base + ":durkeys")
            return pipe.execute()

        if not self._conn.call(look)[0]:
            return
        while int(self._run("upgrade", [UPGRADE_CHUNK])) > 0:
            pass

    def _run(self, name: str, args: list[Any], safe: bool = True) -> Any:
        return self._conn.call(lambda c: self._scripts.run(c, name, args), safe=safe)

    def now(self) -> float:
        seconds, micros = self._conn.call(lambda c: c.time())
        return seconds + micros / 1_000_000

    def enqueue(self, jobs: Sequence[NewJob], now: float | None = None, conn: Any = None) -> list[Job]:
        """All jobs in one atomic script. Safe to repeat on a lost connection: ids dedupe."""
        if not jobs:
            codec.enqueue_args(jobs, now, conn)  # refuses conn= even for no jobs
            return []
        return codec.enqueue_reply(jobs, self._run("enqueue", codec.enqueue_args(jobs, now, conn)))

    def claim(
        self,
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> list[Claimed]:
        """One atomic script takes the leases and counts every limit. Not repeated after a
        connection error once sent (leases it took would expire and be reaped)."""
        if limit <= 0 or not queues:
            return []
        hand = self._hand_flag(queues, holder, now)
        handed = self._take_handed(queues, holder, limit) if hand else []
        if handed:  # only what was handed over: nothing else was due when it was (enqueue_one)
            return handed
        args = self._claim_args(queues, holder, limit, now, hand)
        return self._claimed(self._run("claim", args, safe=False))

    def _take_handed(self, queues: Mapping[str, QueuePolicy], holder: Holder, limit: int) -> list[Claimed]:
        """Up to `limit` of the jobs wait() popped from P:hand:<holder> (handed over by an
        enqueue, already leased to the holder), taken without a round trip: popped, a job is
        this worker's as a claim's reply is (a worker that stops gives back those it did not
        start: give_back_unstarted). Two kinds are confirmed by a call first, as a claim that
        could not reach the server raises StoreUnavailable with the jobs kept when it fails:
        a job whose lease ends within HANDED_SURE (this host's clock against the server's, and
        the reaper's turn) may have been ended by the reaper already and is taken only while its
        token is still on it (a job given back must not start here); and an entry an older
        version's enqueue wrote (its fields written are [], not 1) has a mark in
        P:handed:<holder> that must go before the job starts (HDEL; sent without waiting for
        its reply when its lease is far from its end, as that version did)."""
        claimer = self._claimers.get(frozenset(queues))
        if claimer is None or not claimer.stash or claimer.holder.id != holder.id:
            return []
        with claimer.lock:
            entries, claimer.stash = claimer.stash[:limit], claimer.stash[limit:]
        handed_key = f"{self.base}:handed:{holder.id}"
        cutoff = time.time() + HANDED_SURE
        parsed, marked, unsure = [], [], []
        for job_id, flat, written, _steps in map(json.loads, entries):
            h = codec.pairs(flat)
            parsed.append((job_id, h))
            if float(h["le"]) <= cutoff:
                unsure.append((job_id, h["tk"], written != 1))
            elif written != 1:
                marked.append(job_id)
        try:
            if marked:
                args = ["HDEL", handed_key, *marked]
                try:
                    self._conn.send_only(args)
                except (redis.ConnectionError, redis.TimeoutError):
                    self._conn.call(lambda c: execute(c, args))
            if unsure:
                job_key = f"{self.base}:job:"

                def confirm(c: redis.Redis) -> list[Any]:
                    return [
                        execute(c, ["HDEL", handed_key, i] if legacy else ["HGET", job_key + i, "tk"])
                        for i, _tk, legacy in unsure
                    ]

                replies = self._conn.call(confirm)
                gone = set()
                for (job_id, tk, legacy), reply in zip(unsure, replies, strict=True):
                    if (not reply) if legacy else reply != tk:  # mark gone / token no longer on it
                        gone.add(job_id)
                parsed = [(job_id, h) for job_id, h in parsed if job_id not in gone]
        except BaseException:
            with claimer.lock:
                claimer.stash[:0] = entries
            raise
        out = []
        for job_id, h in parsed:
            out.append(Claimed(codec.from_hash(job_id, h, float(h["sa"])), h["tk"], float(h["ls"]), {}))
        return out

    def give_back_unstarted(self, holder: Holder) -> int:
        """Give back whole (no attempt, no execution on record) the jobs handed over to
        `holder` that it did not start: those its wait() popped and no claim took, and those
        still on its list; its registrations as a waiting worker go first, so that nothing
        more is handed to it, and its claims register it no more. One atomic script
        (give_back.lua), safe to repeat. A worker calls this when it stops claiming
        (tinyjobs/worker.py): without it, ending its leases would end a popped job 'worker
        lost' on record, an attempt used, as for any job a claim gave a worker that died.
        Returns how many jobs."""
        if self._claimers_pid != os.getpid():
            return 0
        queues: set[str] = set()
        popped: list[str] = []
        for names, claimer in self._claimers.items():
            if claimer is None or claimer.holder.id != holder.id:
                continue
            with claimer.lock:
                claimer.waits, claimer.stopped = False, True
                entries, claimer.stash = claimer.stash, []
            queues |= names
            for entry in entries:
                job_id, flat = json.loads(entry)[:2]
                popped += [job_id, codec.pairs(flat)["tk"]]
        if not queues:
            return 0
        return int(self._run("give_back", ["", holder.id, len(queues), *sorted(queues), *popped]))

    def _hand_flag(self, queues: Mapping[str, QueuePolicy], holder: Holder, now: float | None) -> str:
        """claim.lua's handover flag: '1' when the holder, once its claim finds nothing, may be
        registered as a waiting worker that a single enqueue hands its job over to (enqueue_one:
        leased to it at once; its wait() pops the token on P:hand:<holder>, its next claim
        returns the job). Only for this process's holder claiming on the server's clock (a
        handed lease is timed by it) through this store, once it has waited on the same queues
        here (a caller that claims without waiting would leave handed jobs to its next claim).
        A second holder claiming the same queues through this store (two workers in one
        process) turns handovers off for them: the waiter could be the other one."""
        if now is not None:
            return ""
        if self._claimers_pid != os.getpid():  # forked: the parent's claimers are not ours
            self._claimers, self._claimers_pid = {}, os.getpid()
        names = frozenset(queues)
        known = self._claimers.get(names, _UNSEEN)
        if known is _UNSEEN:
            known = _Claimer(holder) if holder.pid == os.getpid() else None
            self._claimers[names] = known
        elif known is not None and known.holder.id != holder.id:
            known = self._claimers[names] = None
        return "1" if known is not None and known.waits else ""

    @staticmethod
    def _claim_args(
        queues: Mapping[str, QueuePolicy], holder: Holder, limit: int, now: float | None, hand: str
    ) -> list[Any]:
        """claim.lua's ARGV: now, the holder, a random token base, the limit, the handover flag,
        then each queue."""
        args = [
            codec.now_arg(now),
            holder.id,
            holder.hostname,
            holder.pid,
            secrets.token_hex(8),
            int(limit),
            hand,
        ]
        for policy in queues.values():
            args.extend(codec.policy_args(policy))
        return args

    @staticmethod
    def _claimed(text: str) -> list[Claimed]:
        """The leases in claim.lua's reply: each row with the fields the claim wrote put in place."""
        reply = json.loads(text)
        at = float(reply[0])
        out = []
        for job_id, flat, changed, steps in reply[1]:
            h = codec.pairs(flat)
            h.update(zip(changed[0::2], changed[1::2], strict=True))
            job = codec.from_hash(job_id, h, at)
            out.append(Claimed(job, h["tk"], float(h["ls"]), codec.pairs(steps)))
        return out

    def renew(self, tokens: Sequence[str], now: float | None = None) -> dict[str, LeaseStatus]:
        """All tokens in one atomic script."""
        if not tokens:
            return {}
        reply = self._run("renew", [codec.now_arg(now), *tokens])
        return dict(zip(tokens, reply, strict=True))

    def save_step(self, token: str, name: str, value: str, now: float | None = None) -> bool:
        """One atomic script, fenced by the token."""
        return self._run("save_step", [codec.now_arg(now), token, name, value]) == 1

    def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        queues: Mapping[str, QueuePolicy],
        holder: Holder,
        limit: int,
        now: float | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        """The settlements, then the claim, in one atomic script (one round trip for the worker's
        cycle). When the connection fails after the call may have been sent, the settlements are
        sent again alone (settle's own rule: the tokens fence them, the repeat may report False)
        and nothing is claimed: leases the lost call may have taken expire and are reaped, as
        after a lost claim."""
        if not settlements or limit <= 0 or not queues:
            return self.settle(settlements, now), self.claim(queues, holder, limit, now)
        hand = self._hand_flag(queues, holder, now)
        handed = self._take_handed(queues, holder, limit) if hand else []
        if len(handed) >= limit:
            return self.settle(settlements, now), handed
        limit -= len(handed)
        args = [
            codec.now_arg(now),
            *_packed(settlements),
            *self._claim_args(queues, holder, limit, now, hand)[1:],
        ]
        try:
            applied, claimed = self._run("settle_claim", args, safe=False)
        except StoreUnavailable:
            return self.settle(settlements, now), handed
        return [bool(x) for x in applied], handed + self._claimed(claimed)

    def settle(self, settlements: Sequence[Settlement], now: float | None = None) -> list[bool]:
        """All settlements in one atomic script (group commit). Repeated after a lost reply: the
        tokens fence it, so a settlement applies once (the repeat may then report False)."""
        if not settlements:
            return []
        return [bool(x) for x in self._run("settle", [codec.now_arg(now), *_packed(settlements)])]

    def reap(self, now: float | None = None, limit: int = 1000) -> int:
        """One atomic script."""
        return int(self._run("reap", [codec.now_arg(now), int(limit)]))

    def holders(self, host: str) -> list[Holder]:
        """One read-only script: the host's holders in P:holders that still lease a job."""
        return [Holder.parse(h) for h in sorted(self._run("holders", [host]))]

    def end_leases(self, holders: Sequence[Holder], now: float | None = None) -> int:
        """One atomic script for all holders."""
        if not holders:
            return 0
        return int(self._run("end_leases", [codec.now_arg(now), *(h.id for h in holders)]))

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        """One atomic script."""
        return self._run("cancel", [codec.now_arg(now), job_id]) == 1

    def retry(self, job_id: str, now: float | None = None) -> bool:
        """One atomic script."""
        return self._run("retry", [codec.now_arg(now), job_id]) == 1

    def get(self, job_id: str, now: float | None = None, executions: bool = False) -> Job | None:
        """One read-only script: the row, `ahead` and the executions agree with each other."""
        return codec.get_reply(job_id, self._run("get", codec.get_args(job_id, now, executions)))

    def jobs(
        self,
        state: str | None = None,
        queue: str | None = None,
        limit: int = 100,
        now: float | None = None,
        newest: bool = False,
        offset: int = 0,
    ) -> list[Job]:
        """One read-only script."""
        args = [codec.now_arg(now), state or "", queue or "", int(limit), int(newest), int(offset)]
        reply = json.loads(self._run("jobs", args))
        at = float(reply[0])
        return [codec.from_hash(job_id, codec.pairs(flat), at) for job_id, flat in reply[1]]

    def counts(self, now: float | None = None) -> dict[str, dict[str, int]]:
        """One read-only script."""
        flat = self._run("counts", [codec.now_arg(now)])
        out: dict[str, dict[str, int]] = {}
        for i in range(0, len(flat), 3):
            out.setdefault(flat[i], {})[flat[i + 1]] = int(flat[i + 2])
        return out

    def purge(self, now: float | None = None, limit: int = 1000) -> int:
        """One atomic script."""
        return int(self._run("purge", [codec.now_arg(now), int(limit)]))

    def fire_cron(self, schedule: str, due: float, job: NewJob, now: float | None = None) -> bool:
        """One atomic script: the last due time and the job are written together, or neither."""
        args = [codec.now_arg(now), schedule, repr(float(due)), *codec.job_args(job)]
        return self._run("fire_cron", args) == 1

    def cron_last(self, schedule: str) -> float | None:
        value = self._conn.call(lambda c: c.hget(self.base + ":cron", schedule))
        return None if value is None else float(value)

    def lead(self, name: str, holder: str, ttl: float, now: float | None = None) -> bool:
        """One atomic script."""
        return self._run("lead", [codec.now_arg(now), name, holder, repr(float(ttl))]) == 1

    def resign(self, name: str, holder: str) -> None:
        """One atomic script."""
        self._run("resign", ["", name, holder])

    def wait(self, queues: Sequence[str], timeout: float) -> bool:
        """A blocking pop on the queues' wake-up lists (pushed when a job becomes due or is
        scheduled, and when a lease ends on a queue with limits), on a connection of its own;
        never past the next scheduled due time, so a delayed job starts on time. That due time is
        read again only when it may have changed (an 's' token: a job was scheduled; a wait that
        ended without a token; the time reached), so a busy queue's wake-ups ('1') cost the
        blocking pop alone. Idle, it costs one blocked connection and no CPU.

        A store whose holder claims from these queues pops P:hand:<holder> first: a job a single
        enqueue handed over to it (enqueue_one), already leased to it; it is kept for the next
        claim, which returns it without a round trip (_take_handed); once its holder stopped
        (give_back_unstarted), no more."""
        if not queues or timeout <= 0:
            return False
        names = tuple(queues)
        due_at = self._due_at.get(names)
        if due_at is None or due_at - time.monotonic() < 0.01:
            due_at = time.monotonic() + self._until_next_due(names)
            self._due_at[names] = due_at
        until_due = due_at - time.monotonic()
        if until_due < 0.01:  # a scheduled job is due: a short pause keeps a busy caller calm
            self._due_at.pop(names, None)
            time.sleep(0.01)
            return True
        blocking = self._conn.blocking()
        block = min(timeout, until_due, BLOCK_AT_MOST)
        keys = [f"{self.base}:q:{q}:wake" for q in names]
        claimer = self._claimers.get(frozenset(names))
        hand = None
        if claimer is not None and self._claimers_pid == os.getpid() and not claimer.stopped:
            claimer.waits = True  # its claims that find nothing register it (claim.lua)
            hand = f"{self.base}:hand:{claimer.holder.id}"
            keys.insert(0, hand)  # jobs handed over to it first
        popped = self._conn.call(lambda c: execute(blocking, ["BLPOP", *keys, block]))
        if popped and claimer is not None and popped[0] == hand:
            with claimer.lock:
                claimer.stash.append(popped[1])  # a job handed over: the next claim returns it
                late = claimer.stopped  # popped as its holder stopped (give_back_unstarted)
            if late:
                self.give_back_unstarted(claimer.holder)
        elif not popped or popped[1] != "1":
            self._due_at.pop(names, None)  # timed out or a job was scheduled: read it again
        return bool(popped) or until_due <= timeout

    def _until_next_due(self, queues: Sequence[str]) -> float:
        """Seconds until the earliest scheduled job of `queues` falls due (server clock)."""

        def read(client: redis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            pipe.time()
            for q in queues:
                pipe.zrange(f"{self.base}:q:{q}:sched", 0, 0, withscores=True)
            return pipe.execute()

        reply = self._conn.call(read)
        now = reply[0][0] + reply[0][1] / 1_000_000
        heads = [entries[0][1] for entries in reply[1:] if entries]
        return min(heads) - now if heads else float("inf")

    def drop(self) -> int:
        """Delete every key of this store's prefix (tests, `verify`). Returns how many."""

        def wipe(client: redis.Redis) -> int:
            keys = list(client.scan_iter(match=self.base + ":*", count=1000))
            for i in range(0, len(keys), 500):
                client.delete(*keys[i : i + 500])
            return len(keys)

        return self._conn.call(wipe)

    def aio(self) -> Any:
        """The async twin of this store's front door (enqueue, get, cancel, retry): aio.py."""
        from .aio import AsyncRedisStore

        return AsyncRedisStore(self)

    def close(self) -> None:
        self._conn.close()


@dataclass
class _Claimer:
    """The holder that claims from a set of queues through this store, whether it has waited
    on them here (or stopped), and the jobs handed over to it that wait() popped and no claim
    took yet."""

    holder: Holder
    waits: bool = False
    stopped: bool = False  # its jobs were given back (give_back_unstarted): no more handovers
    stash: list[str] = field(default_factory=list)  # jobs wait() popped from P:hand:<holder>
    lock: threading.Lock = field(default_factory=threading.Lock)


_UNSEEN: Any = object()
# A handed job whose lease ends within this many seconds (by this host's clock) is taken by a
# call that confirms it was still handed to the holder (_take_handed), not sent without a reply.
HANDED_SURE = 2.0


def _packed(settlements: Sequence[Settlement]) -> list[str]:
    """settle.lua's arguments after `now`: one settlement as '' and its 7 values (no JSON to
    write here or to decode in the script: a lone job's settlement is the commonest), more as
    one JSON argument."""
    if len(settlements) == 1:
        return ["", *codec.settlement_args(settlements[0])]
    return [json.dumps([codec.settlement_args(s) for s in settlements], ensure_ascii=False)]
