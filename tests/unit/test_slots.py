"""The worker loop's wake-up pipe and the inbox that brings finished attempts back to it."""

from __future__ import annotations

import queue
import threading
import time

from tinyjobs.slots import Inbox, Waker


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
