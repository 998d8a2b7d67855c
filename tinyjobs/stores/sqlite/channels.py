"""The SQLite store's wake-up channels: a job that becomes claimable wakes one waiting worker of
its queue, not every waiter on the host.

Each queue waited for on this host has a FIFO beside the database, `<database>-wake-<queue>`
(the name encoded: `channel_path`). A waiting thread holds the FIFOs of its queues open in an
epoll instance of its own, each registered with EPOLLEXCLUSIVE. A writer, after its COMMIT,
writes one byte (a wake-up token) into the FIFO of each queue it made jobs claimable on; the
kernel then wakes one thread among those sleeping in epoll_wait on that FIFO, not all of them
(epoll(7), EPOLLEXCLUSIVE; a pipe write wakes its epoll waiters whether or not it was empty
once the pipe has been polled). The woken thread reads every token the FIFO holds, so tokens
never pile up behind a reader. A worker whose claim fills its slots steps to the end of the
kernel's line of waiters (`step_back`), so that tokens go to idle workers first; when that claim
was one that a wake-up led to and it left due jobs behind, it passes a token on (`pass_on`, a
token of its own kind), so a burst reaches the other idle workers one after another without
every enqueue waking them all.

No lost wake-up: a token written while no thread waits stays in the FIFO, and the epoll
instances of the threads that hold the FIFO open have it on their ready lists, so the next
wait of any of them returns at once. A thread's first wait on a channel cannot see tokens from
before it opened it: the store then looks at PRAGMA data_version (store.wait), as it does once
a SAFETY_TICK for commits that wake no channel (an enqueue in the caller's own transaction).

Crashes: a waiter killed, by SIGKILL too, leaves nothing behind. The kernel drops its epoll
instance with the process, so the next token wakes another waiter; a token it was woken for
and had not read yet stays in the FIFO, for the next wake-up or the others' safety tick.

Files: FIFOs hold no data on disk, so nothing grows; there is one per queue that a thread of
this host has waited for or sent a token to, and none is ever removed (a waiter or writer
holding it open would go on using the removed one). A FIFO found replaced (another inode at
the path) is opened again: writers look once a second, waiters at their safety tick.

Writers open a FIFO read-write, never write-only: a FIFO opened for writing while no reader is
left makes write() raise SIGPIPE, which kills a process that has not ignored it. Nothing reads
from a writer's descriptor; it only keeps the FIFO open, so a token written while no waiter
holds the FIFO stays in it until one opens it (its first wait returns at once).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import select
import stat
import threading
import time
import weakref
from collections.abc import Iterable, Sequence

from .doorbell import WAKE_ENV

SUFFIX = "-wake-"
TOKEN = b"\x01"  # jobs may be claimable
PASSED = b"\x02"  # a claim left jobs behind: for a worker waiting at that moment
# A job of the queue was scheduled for later (an enqueue with a delay, a retry's backoff): the
# waiter reads the earliest scheduled due time again and goes on waiting (store.wait, "timed").
SCHEDULED = b"\x03"
READ_AT_ONCE = 65536  # a pipe's default capacity: one read takes every token it holds
WRITER_CHECK = 1.0  # seconds between a writer's checks that its FIFO is still the one at the path
_PLAIN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_EXCLUSIVE = getattr(select, "EPOLLEXCLUSIVE", 0)


def channel_path(database: str, queue: str) -> str:
    """The FIFO of `queue`: `<database>-wake-<queue>` for a short plain name (letters, digits,
    `_.-`), else `<database>-wake-~` and a hash of the name (`~` is never in a plain name)."""
    if _PLAIN.fullmatch(queue):
        return f"{database}{SUFFIX}{queue}"
    return f"{database}{SUFFIX}~{hashlib.sha256(queue.encode()).hexdigest()[:32]}"


def _ident(fd_or_path: int | str) -> tuple[int, int] | None:
    """(device, inode) of an open descriptor or a path, None when the path is gone."""
    try:
        st = os.stat(fd_or_path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _open_fifo(path: str, create: bool) -> int | None:
    """A non-blocking read-write descriptor of the FIFO at `path`, made first if `create`;
    None when there is none (or it cannot be made, or the path is something else)."""
    if create:
        try:
            os.mkfifo(path, 0o666)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


class Listener:
    """One thread's wait on the channels of a set of queues: an epoll instance holding their
    FIFOs (EPOLLEXCLUSIVE). Waited on by one thread; `step_back` may come from another thread
    of the process. Not shared across fork."""

    def __init__(self, database: str, queues: tuple[str, ...]) -> None:
        self.database, self.queues = database, queues
        # fd -> (queue, path, identity of the FIFO)
        self._fds: dict[int, tuple[str, str, tuple[int, int] | None]] = {}
        self._buffer = bytearray(READ_AT_ONCE)
        self._lock = threading.Lock()  # step_back and close, from different threads
        self._broken = False
        # A SCHEDULED token was read since the store last cleared this: the due time it
        # waits for may be earlier now (store.wait reads it again).
        self.scheduled = False
        self._epoll = select.epoll()  # OSError when out of descriptors: the store polls
        try:
            for queue in queues:
                self._add(queue)
        except BaseException:
            self.close()
            raise

    def _add(self, queue: str) -> None:
        path = channel_path(self.database, queue)
        fd = _open_fifo(path, create=True)
        if fd is None:
            raise OSError(errno.ENOTSUP, f"no FIFO at {path!r}")
        self._fds[fd] = (queue, path, _ident(fd))
        self._register(fd)

    def _register(self, fd: int) -> None:
        try:
            self._epoll.register(fd, select.EPOLLIN | _EXCLUSIVE)
        except OSError as err:
            if err.errno != errno.EINVAL or not _EXCLUSIVE:
                raise
            self._epoll.register(fd, select.EPOLLIN)  # a kernel without EPOLLEXCLUSIVE (< 4.5)

    def step_back(self, queues: Iterable[str]) -> None:
        """Go to the end of the line of waiters of these queues' FIFOs (the kernel wakes the
        first waiting one in the order they were registered): the next token of those
        queues goes to another waiting thread, if there is one. A token that comes between the
        two steps is not lost: registering again finds it and wakes this thread's wait."""
        names = set(queues)
        with self._lock:
            for fd, (queue, _, _) in self._fds.items():
                if queue not in names:
                    continue
                try:
                    self._epoll.unregister(fd)
                    self._register(fd)
                except (OSError, ValueError):
                    self._broken = True  # the wait's next safety tick makes a new listener

    def ready(self, timeout: float) -> bool:
        """True when a token came (all that the woken channels held are taken), within
        `timeout` seconds. Tokens already there when the wait begins count when they say that
        jobs may be claimable (a job added between a claim and this wait), not when a claim
        passed them on: those were for a worker waiting at that moment, and nobody was (else
        the kernel would have woken it), so the busy workers take those jobs on their own
        cycle; waking for them would only cost a draining worker a turn of its loop. A
        wake-up whose token another waiter took meanwhile counts too: it is rare, and a
        spurious wake-up is allowed. SCHEDULED tokens alone end nothing: they set `scheduled`
        and return False at once (the store reads the due time again and waits on)."""
        try:
            if self._take(self._epoll.poll(0), waited=False):
                return True
            if self.scheduled:
                return False  # the caller reads the due time again before it sleeps
            return self._take(self._epoll.poll(max(0.0, timeout)), waited=True)
        except InterruptedError:
            return True

    def _take(self, events: list[tuple[int, int]], waited: bool) -> bool:
        """Read the tokens of the channels that `events` name; whether they end the wait.
        SCHEDULED tokens alone do not (no job is claimable yet): they set `scheduled`."""
        woken = False
        for fd, _ in events:
            try:
                size = os.readv(fd, [self._buffer])
            except (BlockingIOError, InterruptedError):
                size = 0
            scheduled = self._buffer.count(SCHEDULED, 0, size) if size else 0
            if scheduled:
                self.scheduled = True
            if waited:
                woken = woken or size == 0 or scheduled < size
            else:
                woken = woken or self._buffer.find(TOKEN, 0, size) >= 0
        return woken

    def stale(self) -> bool:
        """Whether a channel's FIFO was removed or replaced (the writers now use another), or
        a `step_back` failed half-way."""
        return self._broken or any(_ident(path) != ident for _, path, ident in self._fds.values())

    def close(self) -> None:
        """Close the FIFOs and the epoll instance (in a forked child: its copies only)."""
        with self._lock:
            fds, self._fds = list(self._fds), {}
            _close_all(fds)
            epoll = getattr(self, "_epoll", None)  # absent when select.epoll() failed
            if epoll is not None:
                epoll.close()

    def __del__(self) -> None:
        self.close()


class Channels:
    """The wake-up channels of one database: `wake(queues)` after commits, `listen(queues)`
    for this thread's waits. `enabled` is False where they cannot work (no epoll, or
    TINYJOBS_SQLITE_WAKE=poll); `listen` also returns None when the FIFOs cannot be made (a
    file system without them): the store then polls."""

    def __init__(self, database: str, mode: str | None = None) -> None:
        self.database = database
        mode = (mode if mode is not None else os.environ.get(WAKE_ENV, "")).strip().lower()
        self.enabled = hasattr(select, "epoll") and mode != "poll"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        # queue -> (descriptor, identity of the FIFO, when that was last checked); None for a
        # FIFO that could not be made (tried again once a WRITER_CHECK)
        self._writers: dict[str, tuple[int | None, tuple[int, int] | None, float]] = {}
        self._retired: list[int] = []  # descriptors of FIFOs replaced: closed with the object
        self._listeners: weakref.WeakSet[Listener] = weakref.WeakSet()  # every thread's
        _ALL.add(self)

    # -- writers ---------------------------------------------------------------------------

    def step_back(self, queues: Iterable[str]) -> None:
        """This process's listeners of `queues` go to the end of the kernel's line of waiters
        (a worker that has just filled its slots: the next tokens go to idle workers first). A
        worker's store watcher goes back to waiting before its worker claims, so without this
        the first thread in line, the one the kernel wakes, would often be the watcher of a
        worker with no room left, which would take the token from the idle ones."""
        if not self.enabled or not self._listeners:
            return
        names = set(queues)
        with self._lock:  # another thread may be adding its listener
            listeners = list(self._listeners)
        for listener in listeners:
            listener.step_back(names)

    def pass_on(self, queues: Iterable[str]) -> None:
        """A token of its own kind for each queue where a claim left due jobs behind: one more
        waiting worker wakes, if one waits now (see Listener.ready). The caller steps back
        first."""
        self.wake(queues, PASSED)

    def wake(self, queues: Iterable[str], token: bytes = TOKEN) -> None:
        """One token into the channel of each queue: one thread waiting on it, on this host,
        wakes. Never raises: a channel that cannot be written leaves waiters to their tick."""
        if not self.enabled:
            return
        for queue in queues:
            fd = self._writer(queue)
            if fd is None:
                continue  # no FIFO can be made here: the waiters poll
            try:
                os.write(fd, token)
            except BlockingIOError:
                pass  # full (64 KiB of tokens nobody read): tokens enough
            except OSError:
                self._drop(queue, fd)

    def _writer(self, queue: str) -> int | None:
        """This process's descriptor of the queue's FIFO, made and opened if missing, and
        looked at again once a WRITER_CHECK (a FIFO removed and made again is another one).

        The writer makes the FIFO itself rather than waiting for a waiter to: a process that
        only enqueues (no worker of the queue has waited on this host yet) would otherwise try
        to open a missing file at every enqueue, a failed path lookup each time; its tokens
        now wait in the FIFO for the first waiter, whose first wait they end (once). Where no
        FIFO can be made (a file system without them) the waiters poll instead, and the
        writer tries again once a WRITER_CHECK, not at every commit."""
        if self._pid != os.getpid():
            self._after_fork()
        entry = self._writers.get(queue)
        now = time.monotonic()
        if entry is not None:
            fd, ident, checked = entry
            if now - checked < WRITER_CHECK:
                return fd
            path = channel_path(self.database, queue)
            if fd is not None and _ident(path) == ident:
                self._writers[queue] = (fd, ident, now)
                return fd
            if fd is not None:
                self._drop(queue, fd)
        path = channel_path(self.database, queue)
        with self._lock:
            entry = self._writers.get(queue)
            if entry is not None and entry[0] is not None:
                return entry[0]  # another thread opened it meanwhile
            opened = _open_fifo(path, create=True)
            self._writers[queue] = (opened, None if opened is None else _ident(opened), now)
            return opened

    def _drop(self, queue: str, fd: int) -> None:
        """Forget a writer's descriptor. It is not closed yet: another thread may be writing
        on it right now, and a number closed under it could be reused by an unrelated file;
        the few such descriptors (a FIFO replaced) are closed with this object."""
        with self._lock:
            if self._writers.get(queue, (None,))[0] == fd:
                del self._writers[queue]
                self._retired.append(fd)

    def _after_fork(self) -> None:
        """In a forked child (at the fork, from os.register_at_fork, while the child has one
        thread; else at its first use there): start afresh, closing this process's copies of
        the inherited descriptors (the parent's stay open: closing a copy touches only the
        child's). The lock is replaced, not taken: another thread of the parent may have held
        it at the fork."""
        if self._pid == os.getpid():
            return
        self._lock = threading.Lock()
        inherited = [fd for fd, _, _ in self._writers.values() if fd is not None] + self._retired
        self._writers, self._retired = {}, []
        self._local = threading.local()  # the listeners close their copies when collected
        self._listeners = weakref.WeakSet()
        self._pid = os.getpid()
        _close_all(inherited)

    # -- waiters ---------------------------------------------------------------------------

    def listen(self, queues: Sequence[str]) -> tuple[Listener | None, bool]:
        """This thread's listener on `queues` and whether it was just made (it has not seen
        the tokens before); (None, False) when the store must poll instead. A thread that
        waits on other queues than last time gets a new listener: one still holding a queue
        it no longer waits for would take that queue's tokens from its real waiters."""
        if not self.enabled:
            return None, False
        if self._pid != os.getpid():
            self._after_fork()
        names = tuple(sorted(set(queues)))
        listener: Listener | None = getattr(self._local, "listener", None)
        if listener is not None and listener.queues == names:
            return listener, False
        self.close()
        try:
            listener = Listener(self.database, names)
        except OSError:
            return None, False  # no FIFOs here, or out of descriptors: poll
        self._local.listener = listener
        with self._lock:
            self._listeners.add(listener)
        return listener, True

    def close(self) -> None:
        """Drop this thread's listener (other threads' listeners go when their threads end).
        The writers' descriptors stay open until this object is collected, as the unlock
        bell's: another thread may be writing on one right now."""
        listener = getattr(self._local, "listener", None)
        if listener is not None:
            listener.close()
            self._local.listener = None

    def __del__(self) -> None:
        # Nobody can be writing any more. In a forked child that never used this object the
        # descriptors are inherited copies: closing those touches only the child's.
        _close_all([fd for fd, _, _ in self._writers.values() if fd is not None] + self._retired)


def _close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


_ALL: weakref.WeakSet[Channels] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for channels in list(_ALL):
        channels._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
