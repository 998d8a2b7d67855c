"""The worker loop's wake-up pipe and the inbox that brings finished attempts back to it."""

from __future__ import annotations

import os
import queue
import threading
import time

from support.wait import wait_until

from tinyjobs.slots import Inbox, ThreadSlots, Waker


class CountingWaker:
    def __init__(self) -> None:
        self.wakes = 0

    def wake(self) -> None:
        self.wakes += 1


def test_only_the_first_item_since_the_loop_last_looked_wakes_it():
    waker = CountingWaker()
    inbox = Inbox(waker)  # type: ignore[arg-type]
    assert inbox.take_all() == []
    for item in "abc":
        inbox.put(item)
    assert waker.wakes == 1
    assert inbox.take_all() == ["a", "b", "c"]
    assert inbox.take_all() == []
    inbox.put("d")
    inbox.put("e")
    assert waker.wakes == 2
    assert inbox.take_all() == ["d", "e"]


def test_an_item_put_just_after_the_loop_found_the_inbox_empty_still_wakes_it():
    """The race `take_all` must win: another thread puts just as the loop finds the inbox
    empty, after an earlier put (taken now) had disarmed the wake-up."""
    waker = CountingWaker()
    inbox = Inbox(waker)  # type: ignore[arg-type]
    real = inbox._items

    class LatePut:
        """The inbox's queue, with another thread's put landing as the loop finds it empty."""

        put = real.put

        def get_nowait(self) -> object:
            try:
                return real.get_nowait()
            except queue.Empty:
                inbox._items = real  # once
                inbox.put("late")
                raise

    inbox.put("early")
    assert waker.wakes == 1
    inbox._items = LatePut()  # type: ignore[assignment]
    assert inbox.take_all() == ["early"]
    assert waker.wakes == 2, "the late item did not wake the loop"
    assert inbox.take_all() == ["late"]


def test_wait_returns_when_woken_and_consumes_the_wake_ups():
    waker = Waker()
    try:
        for _ in range(3):
            waker.wake()
        began = time.monotonic()
        waker.wait(5.0)
        assert time.monotonic() - began < 1.0
        began = time.monotonic()
        waker.wait(0.1)  # nothing pending any more: the timeout runs out
        assert time.monotonic() - began >= 0.09
        threading.Timer(0.05, waker.wake).start()
        began = time.monotonic()
        waker.wait(5.0)
        assert time.monotonic() - began < 1.0
    finally:
        waker.close()


def test_calls_go_to_the_first_slot_thread_whenever_it_is_idle_and_every_thread_serves():
    """One after another, calls run on the first thread (warm: its store connection, caches);
    while it is busy the others take them, so `size` calls still run at once; and a call
    submitted while the first thread runs a call's second part waits for that thread."""
    slots = ThreadSlots(3)
    try:
        ran: list[str] = []
        for _ in range(3):
            done = threading.Event()

            def note(done: threading.Event = done) -> None:
                ran.append(threading.current_thread().name)
                done.set()

            slots.submit(note)
            assert done.wait(5)
            wait_until(lambda: slots.first_free)
        assert ran == ["tinyjobs-slot-0"] * 3

        release = threading.Event()
        started: list[str] = []

        def hold() -> None:
            started.append(threading.current_thread().name)
            release.wait(5)

        for _ in range(3):
            slots.submit(hold)
        wait_until(lambda: len(started) == 3)
        assert sorted(started) == ["tinyjobs-slot-0", "tinyjobs-slot-1", "tinyjobs-slot-2"]
        release.set()
        wait_until(lambda: slots.first_free)

        second_part_on: list[str] = []
        then_on: list[str] = []
        finished = threading.Event()

        def then() -> None:
            then_on.append(threading.current_thread().name)
            finished.set()

        def second_part() -> None:
            second_part_on.append(threading.current_thread().name)
            assert slots.first_free  # free already: the next job is handed to it
            slots.submit(then)

        slots.submit(lambda: second_part)
        assert finished.wait(5)
        assert second_part_on == then_on == ["tinyjobs-slot-0"]
    finally:
        slots.close()


def test_an_errand_on_the_only_slot_thread_leaves_it_free_for_the_next_job():
    """The store watcher's errand (a claim) is not a job: a job submitted while it runs goes to
    the first thread after it, and with one slot there is no other thread that could take it."""
    slots = ThreadSlots(1)
    try:
        in_errand, go_on = threading.Event(), threading.Event()
        ran: list[str] = []

        def errand() -> None:
            in_errand.set()
            go_on.wait(5)

        slots.submit_first(errand)
        assert in_errand.wait(5)
        assert slots.first_free
        done = threading.Event()
        slots.submit(lambda: (ran.append(threading.current_thread().name), done.set()) and None)
        go_on.set()
        assert done.wait(5), "the job was never run"
        assert ran == ["tinyjobs-slot-0"]
    finally:
        slots.close()


def test_a_watched_pipe_that_loses_its_reader_wakes_the_wait_once():
    # SUP-05's wake-up: a worker watches the pipe only its supervisor reads; the supervisor's
    # death closes the read end, and the sleeping loop must wake for it without a timeout.
    read_end, write_end = os.pipe()
    waker = Waker()
    try:
        waker.watch(write_end)
        assert waker.wait(0.05) is False and not waker.reader_gone, "a live reader wakes nothing"
        os.close(read_end)
        assert waker.wait(60.0) is True, "the reader's end closing woke the wait"
        assert waker.reader_gone
        assert waker.wait(0.05) is False, "reported once, not at every wait after"
    finally:
        waker.close()
        os.close(write_end)
