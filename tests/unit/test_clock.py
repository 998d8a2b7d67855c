"""One clock per App: store calls get `clock.store_now()` (None: the store judges by its own
clock, CLK-01) and whoever needs the time as a number asks `clock.now()`, which by default is
the store's time, not this process's."""

from __future__ import annotations

import time

import tinyjobs
from tinyjobs.cron import CronScheduler, describe
from tinyjobs.stores.memory import MemoryStore

SKEWED = 1_800_000_000.0  # the store's clock, far from this process's


class SkewedStore(MemoryStore):
    def now(self) -> float:
        return SKEWED


class Log:
    def info(self, *args, **kwargs) -> None:
        pass

    error = warning = info


def test_an_app_without_a_clock_tells_the_time_by_its_store_and_lets_store_calls_judge():
    app = tinyjobs.App(SkewedStore())
    assert app.clock.now() == SKEWED
    assert app.clock.store_now() is None and app.clock.store_now() is None


def test_cron_reads_the_time_from_the_apps_one_clock():
    app = tinyjobs.App(SkewedStore())

    @app.cron("0 * * * *")
    def hourly(run):
        pass

    [row] = describe(app)
    assert row["next"] == "2027-01-15T09:00:00+00:00"  # the hour after SKEWED, not after now
    assert CronScheduler(app, Log()).tick() <= 3600 - (SKEWED % 3600)


def test_a_fake_clock_moves_the_stores_time_with_it():
    clock = tinyjobs.FakeClock(1_700_000_000)
    app = tinyjobs.App("memory://", clock=clock)
    assert app.clock.now() == app.clock.store_now() == 1_700_000_000
    clock.advance("1h")
    assert app.clock.store_now() == 1_700_003_600


def test_the_system_clock_is_this_processs_and_leaves_store_calls_to_the_store():
    clock = tinyjobs.SystemClock()
    assert abs(clock.now() - time.time()) < 5 and clock.store_now() is None


def test_a_clock_that_only_tells_the_time_moves_the_stores_time_as_before():
    class OwnClock:  # a test's own clock, written against the protocol of `now()` alone
        def __init__(self) -> None:
            self.t = 1_700_000_000.0

        def now(self) -> float:
            return self.t

    own = OwnClock()
    app = tinyjobs.App("memory://", clock=own)

    @app.task
    def ok(run):
        pass

    job = ok.enqueue(delay="1m")
    assert app.get(job.id).due_at == own.t + 60 and app.clock.store_now() == own.t
    own.t += 120
    assert app.drain() == 1 and app.clock.now() == own.t
