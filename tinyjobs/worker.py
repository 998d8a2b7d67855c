"""One worker process: claims due jobs in batches, runs them in its slots, renews all of its
leases in one store call per half lease, and settles finished attempts in batches (group
commit). SIGTERM/SIGINT drain it; a second one stops it now.

The loop's work is a role (a lock), not a thread: the main thread takes it for each turn and
sleeps without it, and while it sleeps a lone job needs no turn: the store watcher hands the
claim to the first slot thread, which claims, runs the job and settles it itself (two thread
wake-ups per job at a low rate, where the loop's turns cost four). On a store whose wait wakes
one waiter (Redis, SQLite), two watchers wait, and the one the news woke claims, runs and settles
a lone job itself while the other waits on (one wake-up per job, no hand-off between threads).

Parts of their own: the slots and the jobs claimed ahead of them (tinyjobs/ahead.py), the
store watcher (tinyjobs/storewatch.py), a standalone worker's reaper and cron
(tinyjobs/duties.py), the job events' lines (tinyjobs/joblog.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from . import log
from .ahead import Ahead, limited
from .duties import Duties
from .execution import Attempt, Ending, cancelled_while_running, handed_back, prepare, timed_out
from .heartbeat import Heartbeat
from .holder import Holder
from .joblog import JobLoggers, log_ending, log_started
from .log import get_logger
from .runtime import Runtime
from .slots import AsyncSlots, Inbox, ThreadSlots, Waker
from .stop import StopReason
from .storeguard import StoreGuard
from .stores.base import Claimed
from .stores.deadlines import retrying_at_most
from .storewatch import StoreWatcher, watchers_for

if TYPE_CHECKING:
    # For the types only: tinyjobs.cron loads croniter, which an app without schedules never needs.
    from .cron import CronScheduler
    from .reaper import Reaper

R = TypeVar("R")

IDLE_POLL = 0.25  # claim at least this often, so scheduled jobs start when they fall due
# ... unless the store's wait returns when they fall due ("timed") and no queue has a limit
# (room under a limit comes back with time, and not every store wakes waiters for it): then
# the clock's claims are a safety net only, and an idle worker on PostgreSQL (a claim costs
# about 0.5 ms of CPU) or Redis stays under 2 ms of CPU a second. Each of its turns costs a
# cold wake-up too (a few hundred µs on a shared machine, more than the claim's Python): 2 s,
# as often as a supervised worker reports (supervisor/config.py), and its parent's death
# wakes it by itself (`parent_fd`), so nothing asks for more.
TIMED_POLL = 2.0
LINGER = 0.005  # group commit: a finished attempt waits at most this long for others to settle with


@dataclass(slots=True)
class Running:
    """A job in hand: its claim, its logger, when it started (while `held`, claimed ahead and
    not started yet: when it was claimed), and what the worker learned since. `logger` carries
    the job's fields (job_id, task, queue, attempt), bound once for all of the job's events."""

    claimed: Claimed
    logger: Any
    started: float
    held: bool = False
    ran: float = 0.0  # seconds the handler ran, set by its slot as it returns (0.0 until then)
    deadline: float | None = None
    future: Future[None] | None = None
    timed_out: bool = False
    lost: bool = False
    cancel: bool = False


class Worker:
    """Runs jobs of `queues` (every queue the app knows by default) in `slots` at once."""

    def __init__(
        self,
        app: Runtime,
        slots: int = 8,
        queues: Sequence[str] | None = None,
        drain_timeout: float = 30.0,
        *,
        max_jobs: int | None = None,
        parent_pid: int | None = None,
        on_tick: Callable[[Worker], None] | None = None,
        handle_signals: bool = True,
        reaper: bool = True,
        parent_fd: int | None = None,
    ) -> None:
        """`parent_pid`: stop at once (orphaned) when the parent process is gone, checked at
        every turn; `parent_fd`, the write end of a pipe the parent alone reads, wakes the
        sleeping loop as the parent dies (its read end closes), so that it notices at once
        (SUP-05), not at its next turn."""
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.app, self.slots, self.drain_timeout = app, slots, drain_timeout
        self.queues = list(queues) if queues else app.known_queues()
        self.policies = app.policies(self.queues)
        self.max_jobs, self.parent_pid, self.on_tick = max_jobs, parent_pid, on_tick
        self.handle_signals = handle_signals
        self.holder = Holder.current()
        self.running: dict[str, Running] = {}
        self.finished = 0
        self.reason: StopReason | None = None
        self._hard = False
        self._draining = False
        self._drain_deadline = 0.0
        self._unsettled: list[tuple[Running, Ending]] = []
        self._unsettled_since = 0.0
        self._claimed_in_flush = False  # this turn's settle_and_claim claimed: no second claim
        # When the last claim was made (by the loop or a helper): the clock's claims (every
        # IDLE_POLL or TIMED_POLL) count from it, so a worker whose slot 0 claims a job every
        # few milliseconds makes none of its own (on SQLite, a claim on the loop's connection
        # first re-reads the pages slot 0's connection wrote).
        self._claimed_at = float("-inf")
        self._woken = True  # whether the loop's last wait ended by a wake-up (not its timeout)
        self._waker = Waker()
        if parent_fd is not None:
            self._waker.watch(parent_fd)
        # The loop's role: whoever holds it may change the worker's state (running, unsettled,
        # the claims). The loop's thread holds it for each turn and sleeps without it; while it
        # sleeps, the store watcher and the first slot thread take it to do the one step a lone
        # job needs (claim it, settle it) themselves, instead of waking the loop to do it.
        self._role = threading.Lock()
        self._loop_wake_at = 0.0  # monotonic time the sleeping loop wakes by itself
        self._turn_began = 0.0  # the `now` of the loop's last turn
        self._helper_error: BaseException | None = None  # raised by the loop: see _lend_a_hand
        # A claim errand is queued on the first slot and has not begun: news meanwhile needs no
        # second one (see _hand_claim_to_first_slot).
        self._claim_queued = False
        self._loop_ident: int | None = None  # the thread in run()
        self._idle_poll = IDLE_POLL if self._polls(app.store, self.policies.values()) else TIMED_POLL
        # Claims when the store has news while a slot is free (sleeps while the worker is full).
        self._watcher = StoreWatcher(
            app.store, self.queues, self._on_news, lambda: self.reason is not None, watchers_for(app.store)
        )
        # A store watcher running a lone job itself (_run_here): `take` while it claims (the
        # first job it starts stays with it, `call`), `runs` while it runs that job.
        self._here = threading.local()
        # Finished attempts (entry, ending or None when the lease was lost), from the slots.
        self._results = Inbox(self._waker)
        # The slots, and the jobs claimed ahead of them (tinyjobs/ahead.py): held ones are in
        # `running` too (in hand, their leases renewed with the others).
        self._ahead: Ahead[Running] = Ahead(slots, self.policies.values(), lambda: self.reason is not None)
        self._threads: ThreadSlots | None = None
        self._async = AsyncSlots()
        self._next_renew = float("inf")
        self._log = get_logger(pid=os.getpid())
        self._job_logger = JobLoggers(pid=os.getpid())
        # Every store call of the loop: bounded, backed off, one log line per outage.
        self._guard = StoreGuard(self._log)
        self.heartbeat = Heartbeat(app.store, self.holder, self.queues, slots, app.clock.store_now, self._log)
        # A standalone worker keeps the store tidy itself, and runs cron; under the supervisor
        # its leader does.
        self._duties = Duties(app, self._log, self._guard, standalone=reaper)

    @property
    def reaper(self) -> Reaper | None:
        """A standalone worker's reaper (tinyjobs/duties.py), None under the supervisor."""
        return self._duties.reaper

    @property
    def cron(self) -> CronScheduler | None:
        """A standalone worker's cron scheduler, None under the supervisor or without schedules."""
        return self._duties.cron

    # -- control (safe from signal handlers: flags and one pipe write) ----------------------

    def request_stop(self, reason: StopReason = StopReason.STOPPED) -> None:
        """Stop claiming and drain: running jobs finish within the drain timeout."""
        if self.reason is None:
            self.reason = reason
        self._waker.wake()

    def request_hard_stop(self) -> None:
        """Hand back every running job now and stop."""
        self._hard = True
        self.request_stop(StopReason.HARD_STOP)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.reason is not None:
            self.request_hard_stop()
        else:
            self.request_stop(StopReason.STOPPED)

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> StopReason:
        """Work until stopped; returns why: stopped, recycle (a sync handler timed out),
        max-jobs, orphaned (the parent died) or hard-stop."""
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        self._loop_ident = threading.get_ident()
        self._threads = ThreadSlots(self.slots)
        self._watcher.start()
        # A thread: never delays a renewal. Jobs in slots: those claimed ahead wait outside them.
        self.heartbeat.start(lambda: len(self.running) - len(self._ahead))
        self._log.info("worker.started", slots=self.slots, queues=self.queues)
        if self.reaper is not None:
            self._store_call("end_leases", self.reaper.end_dead_holders)
        try:
            self._loop()
        finally:
            # Jobs the store handed this worker and no claim took (Redis: popped): back whole.
            give_back = getattr(self.app.store, "give_back_unstarted", None)
            if give_back is not None:
                self._store_call("give_back", give_back, self.holder)
            self.heartbeat.stop()
            self._threads.close()
            self._async.close()
            self._log.info("worker.stopped", reason=self.reason, jobs=self.finished)
            log.flush()
        return self.reason or StopReason.STOPPED

    def _loop(self) -> None:
        while not self._turn():
            pass

    def _turn(self) -> bool:
        """One turn: settle what finished, drain when stopping, time out, renew, claim, then
        the standalone duties; sleep until something is due. True once the worker is done."""
        with self._role:
            if self._work_a_turn():
                return True
            firm = self._firm_deadline()
            sleep = self._sleep_for(self._turn_began, firm)
            # The loop sleeps from the turn's end, as it always did (a busy worker's batches
            # then gather what finishes during the turn too), so it wakes up to a turn's length
            # after this; helpers compare with this time, computed as they compute theirs (the
            # turn's length added to it would make every deadline look earlier: a wake-up each).
            # Not past a firm deadline, though (a lease renewal, a job's timeout, the drain's
            # end): a slow turn (a reap or purge on a loaded server, a cron poll, a store call
            # retried within the guard's patience) would push it a turn's length further out,
            # and a 2 s lease renewed at 1 s has 1 s to spare (JOB-04).
            self._loop_wake_at = min(self._turn_began + sleep, firm)
            sleep = min(sleep, max(0.0, firm - time.monotonic()))
        self._woken = self._waker.wait(sleep)
        return False

    def _work_a_turn(self) -> bool:
        """The turn's work, in the loop's role."""
        if self._helper_error is not None:
            raise self._helper_error
        self._claimed_in_flush = False
        self._settle_ready()
        now = self._turn_began = time.monotonic()
        if self._ahead:
            self._give_back(self._ahead.mind(now, self._launch))
        if self._stopping(now):
            if self._ahead:  # a drain runs no job it has not started: back at once, not run
                self._give_back(self._ahead.take_all())
            if self._finish_drain(now):
                return True
        self._check_timeouts(now)
        if now >= self._next_renew:
            self._renew()
        if self.reason is None and not self._claimed_in_flush and self._claim_due(now):
            self._claim()  # not right after settle_and_claim's claim: it took what there was
        self._duties.run()
        if self.on_tick is not None:
            self.on_tick(self)
        log.flush()  # this turn's events in one write, before the loop sleeps
        self._show_room()
        return False

    def _lend_a_hand(self, step: Callable[[], None], *, wait: bool) -> bool:
        """Do `step`, a part of the loop's turn, on this thread while the loop sleeps, instead
        of waking the loop to do it: at a low rate that is one thread's wake-up (a pipe write,
        a wake-up from select, two GIL hand-offs) less per job, and the loop sleeps through.

        False, with nothing done, when the worker stops (a drain is the loop's alone) or the
        role is taken and `wait` is False: the caller then wakes the loop instead. When the
        step leaves something due before the loop's own wake-up (a job's timeout or lease
        renewal, a settlement's LINGER, a retry after a failed store call), the loop is woken
        for it. An error in the step is the loop's: it raises it at its next turn, as it
        would have raised it doing the step itself."""
        if self.reason is not None or not self._role.acquire(blocking=wait):
            return False
        try:
            if self.reason is not None or self._helper_error is not None:
                return False
            step()
            self._show_room()
            now = time.monotonic()
            if now + self._sleep_for(now) < self._loop_wake_at - 1e-6:  # not for a rounding
                self._waker.wake()
        except BaseException as err:
            self._helper_error = err
            self._waker.wake()
        finally:
            self._role.release()
        log.flush()
        return True

    def _claim_due(self, now: float) -> bool:
        """Whether this turn claims: always when something woke the loop (the store watcher's
        news, more jobs than a claim took, a helper's failed call) or while the store is away
        (the guard's retry), else by the clock: when the last claim, the loop's or a helper's,
        is an idle poll ago. A helper's claim covered every job due by then, so the clock's
        bound (a claim at least every idle poll) holds either way."""
        return self._woken or self._guard.delay > 0 or now >= self._claimed_at + self._idle_poll - 0.001

    def _stopping(self, now: float) -> bool:
        """True while the worker stops. Notices a dead parent (stop now, SUP-05: it is gone when
        the pipe only it reads, `parent_fd`, lost its reader, or another process is our parent
        now); on the first turn of a stop, logs it and sets the drain's deadline, which a hard
        stop brings to now."""
        if self.parent_pid is not None and (self._waker.reader_gone or os.getppid() != self.parent_pid):
            self.reason, self._hard = StopReason.ORPHANED, True
        if self.reason is None:
            return False
        if not self._draining:
            self._draining = True
            self._log.info("worker.draining", reason=self.reason, running=len(self.running))
            self._drain_deadline = now + (0 if self._hard else self.drain_timeout)
        if self._hard:  # a hard stop during a drain ends the drain now
            self._drain_deadline = min(self._drain_deadline, now)
        return True

    @staticmethod
    def _polls(store: Any, policies: Any) -> bool:
        """Whether the loop must claim every IDLE_POLL: the store's wait does not return when
        scheduled jobs fall due, or a queue has a limit."""
        if "timed" not in getattr(store, "capabilities", ()):
            return True
        return limited(policies)

    def _sleep_for(self, now: float, firm: float | None = None) -> float:
        """Seconds from `now` until the loop's next turn is due (`firm`: `_firm_deadline()`,
        when the caller has it already)."""
        claim_at = self._claimed_at + self._idle_poll  # the clock's next claim (_claim_due)
        if claim_at <= now:  # no claim this turn (stopping, or a settle's claim failed)
            claim_at = now + self._idle_poll
        wake_at = min(self._firm_deadline() if firm is None else firm, claim_at)
        if self._duties.due_at > now:
            wake_at = min(wake_at, self._duties.due_at)
        if self._unsettled:
            wake_at = min(wake_at, self._unsettled_since + LINGER)
        return max(self._guard.retry_at - now if self._guard.delay else 0.0, wake_at - now, 0.0)

    def _firm_deadline(self) -> float:
        """The monotonic time by which the loop must turn, however long its last turn took:
        the next lease renewal, a running job's timeout, the drain's end (not before a
        pending backoff ends: a store call would only be skipped)."""
        due = self._next_renew
        for entry in self.running.values():
            if entry.deadline is not None and not entry.timed_out:
                due = min(due, entry.deadline)
        if self.reason is not None:
            due = min(due, self._drain_deadline)
        held_due = self._ahead.due_by()
        if held_due is not None:
            due = min(due, held_due)
        return max(due, self._guard.retry_at if self._guard.delay else 0.0)

    def _show_room(self) -> None:
        """Tell the store watcher whether a slot is free."""
        self._watcher.show_room(len(self.running) < self.slots)

    def _on_news(self, covered: bool) -> None:
        """(A store watcher's, while a slot is free.) When another watcher still waits on the
        store (`covered`), claim and run the job here (`_run_here`): no thread is woken for a
        lone job. Otherwise have the first slot claim while the loop sleeps; were the role
        taken (a turn, a slot settling), waiting for it would be one more sleep per job: the
        loop claims."""
        if covered and self._run_here():
            return
        if not self._hand_claim_to_first_slot():
            self._waker.wake()

    def _run_here(self) -> bool:
        """(A store watcher's, while another one waits on the store.) Claim in the loop's role,
        if it is free, and run the first job claimed on this thread, then settle it here when
        it is the only one running (as the first slot does, `_launch`); the others go to the
        slots. Meanwhile the other watcher hears the news: a long job here keeps no job
        waiting. False, with nothing done, when the role is taken or the worker stops."""
        here = self._here
        here.take, here.call = True, None
        try:
            done = self._lend_a_hand(self._claim, wait=False)
            call = here.call
        finally:
            here.take, here.call = False, None
        if call is not None:
            here.runs = True
            try:
                after = call()
                here.runs = False
                if after is not None:
                    after()
            except BaseException as err:  # the loop's to raise (as _lend_a_hand's): not a deaf watcher
                self._helper_error = err
                self._waker.wake()
            finally:
                here.runs = False
        return done

    def _hand_claim_to_first_slot(self) -> bool:
        """(The store watcher's.) Have the first slot thread claim, when it has no job, and run
        what it claims itself: its connection claims and settles a lone job (on SQLite two
        connections taking turns at writing would each re-read the pages the other wrote), and
        the claim wakes no thread but that one. False when the loop's role is taken, the worker
        stops or that slot has a job: the caller wakes the loop to claim. Holds the role only
        to hand the errand over (one submitter at a time), so slot 0 rarely waits for it. One
        errand at a time: news while one waits to begin is its (its claim comes after), so
        a burst of news (a store's wait returning again and again) queues no pile of claims
        ahead of the next job this slot is given."""
        if self.reason is not None or not self._role.acquire(blocking=False):
            return False
        try:
            threads = self._threads
            if self.reason is not None or threads is None or not threads.first_free:
                return False
            if self._claim_queued:  # its claim begins after this news: it takes the job too
                return True
            self._claim_queued = True
            threads.submit_first(self._claim_as_first_slot)  # not a job: what it claims goes there too
            return True
        finally:
            self._role.release()

    def _claim_as_first_slot(self) -> None:
        self._claim_queued = False  # before the claim: news from now on may need another
        if not self._lend_a_hand(self._claim, wait=True):
            self._waker.wake()

    # -- claiming and running --------------------------------------------------------------

    def _claim(self) -> None:
        free = self._room_after(0)
        self._claimed_at = time.monotonic()  # even with no room: the clock's claim is not due
        if free <= 0 or not self._guard.ready():
            return
        began = time.monotonic()
        claimed = self._store_call(
            "claim", self.app.store.claim, self.policies, self.holder, free, self.app.clock.store_now()
        )
        if claimed:
            self._ahead.timed_cycle(began)
        for item in claimed or []:
            self._start(item)
        if claimed:
            self._show_room()  # when full, the watcher stops now, not after the turn's duties
        if claimed and len(claimed) == free:
            self._waker.wake()  # there may be more; come back once slots free up

    def _start(self, claimed: Claimed) -> None:
        """Take a claimed job in hand: start it in a free slot, or hold it (claimed ahead)
        until a slot frees up. The caller holds the loop's role."""
        entry = Running(claimed, self._job_logger(claimed.job), time.monotonic())
        self.running[claimed.token] = entry
        self._next_renew = min(self._next_renew, entry.started + claimed.lease / 2)
        if self._ahead.place(entry):
            self._launch(entry)

    def _launch(self, entry: Running) -> None:
        """Start `entry`, for which a slot was taken, on a slot thread (the role's holder)."""
        attempt = self._begin(entry)
        if attempt is None:
            return
        threads = self._threads
        assert threads is not None

        def call() -> Callable[[], None] | None:
            self._ahead.run_in_slot(entry, attempt, self._begin, self._results)
            if (threads.on_first() or getattr(self._here, "runs", False)) and len(self.running) == 1:
                return settle  # once this slot is free again, for the job claimed with it
            self._results.nudge()
            return None

        def settle() -> None:
            # A lone job (the only one running) has finished: the loop would settle it at once
            # (_settle_now), so settle here (and claim the next jobs with it). Not when others
            # run: a busy worker's settlements are the loop's group commit, and a slot taking
            # turns with the loop at it only adds wake-ups and empty turns. On the first slot
            # thread only, so that at most one more thread keeps a store connection (one per
            # thread on SQLite and PostgreSQL). Not when the role is taken: its holder may be
            # settling this very job, and waiting to find nothing left costs a sleep and a
            # wake-up.
            if not self._lend_a_hand(self._settle_ready, wait=False):
                self._results.nudge()

        here = self._here
        if getattr(here, "take", False) and here.call is None:
            here.call = call  # a store watcher's first job: it runs it itself (_run_here)
            return
        threads.submit(call)

    def _begin(self, entry: Running) -> Attempt | None:
        """The start of a job for which a slot was taken (`Ahead.place`/`next`), on any thread:
        logs `job.started`, and starts the clock of its timeout, now (not at its claim). An
        async job goes to the event loop, a job that ends at once (an unknown task) to the
        inbox (its slot given back); a sync one is returned for the caller's slot to run."""
        if entry.held and (entry.lost or entry.cancel):  # learned at a renewal while it waited
            self._ahead.free_slot()
            self._results.put((entry, None if entry.lost else handed_back(entry.claimed)))
            return None
        entry.held = False
        entry.started = time.monotonic()
        log_started(entry.logger)
        attempt = prepare(self.app.tasks, entry.claimed, self.app.store, self.app.clock.store_now)
        if isinstance(attempt, Ending):
            self._ahead.free_slot()
            self._results.put((entry, attempt))  # the loop's next wait returns at once to settle it
            return None
        timeout = self.app.timeout_for(attempt.task)
        if attempt.task.is_async:
            entry.future = self._async.submit(self._run_async(entry, attempt, timeout))
            return None
        if timeout is not None:
            entry.deadline = entry.started + timeout
            if threading.get_ident() != self._loop_ident:
                self._waker.wake()  # the sleeping loop's next turn may be due before it
        return attempt

    async def _run_async(self, entry: Running, attempt: Attempt, timeout: float | None) -> None:
        import asyncio

        try:
            ending = await attempt.run_async(timeout)
        except asyncio.CancelledError:
            ending = cancelled_while_running(entry.claimed)
        entry.ran = max(time.monotonic() - entry.started, 1e-9)
        self._ahead.free_slot()  # the loop starts the next held job, if any
        self._results.put((entry, ending))

    def _give_back(self, batch: list[Running]) -> None:
        """(The loop's.) Hand back jobs claimed ahead and not started (`Ahead.mind`,
        `Ahead.take_all`): not run, the attempt given back (as a drain hands back a running
        job), settled with the next batch, which goes at once."""
        if not batch:
            return
        if not self._unsettled:
            self._unsettled_since = time.monotonic()
        self._unsettled.extend((entry, handed_back(entry.claimed)) for entry in batch)
        self._flush(self._unsettled)

    def _check_timeouts(self, now: float) -> None:
        """A sync handler past its timeout cannot be stopped: keep its lease, stop claiming,
        let the others finish, then settle it as timed out and recycle the process (JOB-12)."""
        for entry in self.running.values():
            if entry.deadline is not None and now >= entry.deadline and not entry.timed_out:
                entry.timed_out = True
                entry.logger.warning("job.timeout")
                self.request_stop(StopReason.RECYCLE)

    # -- settling ----------------------------------------------------------------------------

    def _settle_ready(self) -> None:
        finished = self._results.take_all()
        self._ahead.note_runs(finished)
        for entry, ending in finished:
            if entry.timed_out:
                continue  # settled as a timeout when the process leaves
            if ending is None or entry.lost:
                self.running.pop(entry.claimed.token, None)
                entry.logger.warning("job.lease_lost")
                continue
            if not self._unsettled:
                self._unsettled_since = time.monotonic()
            self._unsettled.append((entry, ending))
        if self._unsettled and self._settle_now():
            self._flush(self._unsettled)

    def _settle_now(self) -> bool:
        """Group commit: settle once every running job has finished, or half the slots have,
        or the oldest finished attempt has waited LINGER; one transaction then covers many."""
        return (
            self.reason is not None
            or len(self._unsettled) >= len(self.running) - len(self._ahead)
            or len(self._unsettled) >= max(1, self.slots // 2)
            or time.monotonic() - self._unsettled_since >= LINGER
        )

    def _flush(self, batch: list[tuple[Running, Ending]]) -> bool:
        settlements = [ending.settlement for _, ending in batch]
        free = self._room_after(len(batch))
        store, now = self.app.store, self.app.clock.store_now()
        claimed: list[Claimed] = []
        applied: list[bool] | None
        if free > 0:
            # The worker's cycle in one store call: settle what finished, take the next jobs
            # (on SQLite one transaction, one fsync, for both).
            began = time.monotonic()
            both = self._store_call(
                "settle", store.settle_and_claim, settlements, self.policies, self.holder, free, now
            )
            applied, claimed = both if both is not None else (None, [])
            self._claimed_in_flush = both is not None
            if both is not None:
                self._claimed_at = time.monotonic()
                self._ahead.timed_cycle(began)
        else:
            applied = self._store_call("settle", store.settle, settlements, now)
        if applied is None:
            return False  # kept in self._unsettled; retried after the backoff
        for (entry, ending), ok in zip(batch, applied, strict=True):
            self.running.pop(entry.claimed.token, None)
            if not entry.held:  # one claimed ahead and handed back unstarted ran no job
                self.finished += 1
            log_ending(entry.logger, ending, ok, entry.started, entry.held)
        batch.clear()
        for item in claimed:
            self._start(item)
        if self.max_jobs is not None and self.finished >= self.max_jobs:
            self.request_stop(StopReason.MAX_JOBS)
        return True

    def _room_after(self, settling: int) -> int:
        """Jobs to claim once `settling` of the jobs in hand are settled: the free slots and
        those claimed ahead (`Ahead.extra`), none while stopping, and never more than --max-jobs
        leaves (every job in hand counts, held ones too)."""
        if self.reason is not None:
            return 0
        ahead = self._ahead.extra(time.monotonic(), self.running.values())
        room = self.slots + ahead - len(self.running) + settling
        if self.max_jobs is not None:
            room = min(room, self.max_jobs - self.finished - len(self.running))
        return max(room, 0)

    def _finish_drain(self, now: float) -> bool:
        """True when the drain is over: nothing but timed-out jobs runs, or the deadline
        passed (what still runs is handed back, uncounted). Timed-out jobs settle last."""
        live = [e for e in self.running.values() if not e.timed_out]
        if live and now < self._drain_deadline:
            return False
        batch = [(e, handed_back(e.claimed)) for e in live if not e.lost]
        for entry in live:
            if entry.future is not None:
                entry.future.cancel()
        for entry in self.running.values():
            if entry.timed_out:
                timeout = self.app.timeout_for(self.app.tasks[entry.claimed.job.task]) or 0.0
                batch.append((entry, timed_out(entry.claimed, timeout)))
        if batch and not self._flush(batch):
            return now >= self._drain_deadline + 5.0  # the store is down: give up after a grace
        return True

    # -- leases ------------------------------------------------------------------------------

    def _renew(self) -> None:
        if not self.running:
            self._next_renew = float("inf")
            return
        tokens = [t for t, e in self.running.items() if not e.lost]
        statuses = self._store_call("renew", self.app.store.renew, tokens, self.app.clock.store_now()) or {}
        for token, status in statuses.items():
            entry = self.running.get(token)
            if entry is None or status == "ok":
                continue
            if status == "lost":
                entry.lost = True
            elif not entry.cancel:
                entry.cancel = True
                entry.logger.info("job.cancel_requested")
            if entry.future is not None:
                entry.future.cancel()
        lease = min(e.claimed.lease for e in self.running.values())
        # A failed renewal is tried again soon enough to come before the lease's end (at
        # 1 s, a 2 s lease renewed at its half would have none left).
        self._next_renew = time.monotonic() + (lease / 2 if statuses else min(1.0, lease / 4))

    def _store_call(self, what: str, fn: Callable[..., R], *args: Any) -> R | None:
        """Call the store through the guard: None when it failed or a backoff is pending.

        A thread lending the loop a hand (`_lend_a_hand`) calls only while the store is known
        to be reachable, and a failure of its call is not reported (the guard's log would say
        the store went away twice in one outage: this thread's connection, one per thread on
        SQLite and PostgreSQL, fails once more after the loop's came back): it wakes the loop,
        whose own call, through the guard, retries what failed (a settlement stays unsettled)
        and tells whether the store is away."""
        if threading.get_ident() == self._loop_ident:
            return self._guard.call(what, fn, *args)
        if not self._guard.reachable or not self._guard.ready():
            return None
        try:
            with retrying_at_most(self._guard.patience):
                return fn(*args)
        except Exception:
            self._waker.wake()
            return None
