"""CRON-01 through `@app.cron` and CronScheduler.tick, on every store: once per due time, never
twice (several schedulers) and never zero (a gap, a restart), catch-up, time zones, seconds."""

from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from support.wait import wait_until
from support.workers import worker_thread

import tinyjobs
from tinyjobs.cron import FIRST_RUN_GRACE, CronScheduler
from tinyjobs.errors import ConfigError, DuplicateTask
from tinyjobs.stores.base import NewJob

T0 = 1_700_000_100.0  # on a five-minute boundary (2023-11-14 22:15:00 UTC)
BERLIN = ZoneInfo("Europe/Berlin")


class Log:
    """A logger that keeps what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def info(self, event: str, **fields) -> None:
        self.events.append((event, fields))

    error = warning = info


@pytest.fixture
def clock():
    return tinyjobs.FakeClock(T0)


@pytest.fixture
def app(store, clock):
    app = tinyjobs.App(store, clock=clock)
    app.dues = []  # type: ignore[attr-defined]
    return app


def scheduler(app) -> CronScheduler:
    return CronScheduler(app, Log())


def fired(app, name: str) -> list[float]:
    """The due times fired for schedule `name`, from the jobs' ids, oldest first."""
    prefix = f"cron:{name}:"
    return sorted(float(j.id[len(prefix) :]) for j in app.jobs(limit=10_000) if j.id.startswith(prefix))


def every_five_minutes(app, **options):
    @app.cron("*/5 * * * *", **options)
    def sweep(run):
        app.dues.append(run.due.timestamp())
        return run.due.isoformat()

    return sweep


def test_cron01_fires_each_due_time_once_with_two_schedulers(app):
    every_five_minutes(app)
    first, second = scheduler(app), scheduler(app)
    for now in (T0 - 1, T0, T0 + 0.5, T0 + 1, T0 + 299, T0 + 300, T0 + 300.2, T0 + 601):
        first.tick(now)
        second.tick(now)
        first.tick(now)
    assert fired(app, "sweep") == [T0, T0 + 300, T0 + 600]
    assert app.store.cron_last("sweep") == T0 + 600


def test_cron01_many_schedulers_at_once_fire_each_due_time_once(app):
    every_five_minutes(app)
    schedulers = [scheduler(app) for _ in range(6)]
    for sched in schedulers:
        sched.tick(T0 - 1)  # each has seen the schedule before its first due time
    for now in (T0 + 0.1, T0 + 300.1):
        barrier = threading.Barrier(len(schedulers))

        def tick(sched: CronScheduler, at: float, gate: threading.Barrier) -> None:
            gate.wait()
            sched.tick(at)

        threads = [threading.Thread(target=tick, args=(s, now, barrier)) for s in schedulers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert fired(app, "sweep") == [T0, T0 + 300]


def test_cron01_the_fired_job_runs_with_its_due_time(app, clock):
    task = every_five_minutes(app, queue="sweeps")
    scheduler(app).tick(T0)
    job = app.get(f"cron:sweep:{int(T0)}")
    assert (job.task, job.queue, job.state) == ("sweep", "sweeps", "waiting")
    clock.set(T0 + 2)
    assert app.drain() == 1
    assert app.dues == [T0]
    assert app.get(job.id).result == datetime.fromtimestamp(T0, UTC).isoformat()
    assert task.name == "sweep" and app.crons["sweep"].task is task


def test_cron01_a_due_time_missed_during_a_gap_fires_once_afterwards(app):
    every_five_minutes(app)
    scheduler(app).tick(T0)
    # No scheduler ran across T0 + 300 (a restart, a leader change): a fresh one fires it.
    restarted = scheduler(app)
    restarted.tick(T0 + 310)
    restarted.tick(T0 + 320)
    scheduler(app).tick(T0 + 330)
    assert fired(app, "sweep") == [T0, T0 + 300]


def test_cron01_after_a_long_outage_only_the_latest_missed_time_fires(app):
    every_five_minutes(app)
    scheduler(app).tick(T0)
    later = scheduler(app)
    later.tick(T0 + 3 * 3600 + 10)
    later.tick(T0 + 3 * 3600 + 20)
    assert fired(app, "sweep") == [T0, T0 + 3 * 3600]


def test_cron01_catch_up_fires_each_missed_time_inside_the_window_once_oldest_first(app, clock):
    every_five_minutes(app, catch_up="1h")
    scheduler(app).tick(T0)
    now = T0 + 3 * 3600 + 10
    for sched in (scheduler(app), scheduler(app)):
        sched.tick(now)
    window = [T0 + 3 * 3600 - 3600 + 300 * i for i in range(1, 13)]  # inside (now - 1h, now]
    assert fired(app, "sweep") == [T0, *window]
    clock.set(now)
    app.drain()
    assert app.dues == [T0, *window]  # oldest first: the jobs are due at their due times


def test_cron01_catch_up_after_a_short_gap_fires_every_missed_time(app):
    every_five_minutes(app, catch_up="1h")
    scheduler(app).tick(T0)
    scheduler(app).tick(T0 + 1000)
    assert fired(app, "sweep") == [T0, T0 + 300, T0 + 600, T0 + 900]


def test_cron01_catch_up_still_fires_the_latest_time_when_it_lies_outside_the_window(app):
    @app.cron("0 3 * * *", catch_up="1h")
    def nightly(run):
        return None

    day = datetime(2024, 5, 1, 3, tzinfo=UTC).timestamp()
    scheduler(app).tick(day)
    scheduler(app).tick(day + 86400 + 5 * 3600)
    assert fired(app, "nightly") == [day, day + 86400]


def test_cron01_first_run_fires_nothing_stale_but_never_misses_its_first_due_time(app):
    every_five_minutes(app)
    sched = scheduler(app)
    sched.tick(T0 + 200)  # deployed 200 s after a due time: not fired
    assert fired(app, "sweep") == []
    assert sched.tick(T0 + 250) == pytest.approx(50)
    sched.tick(T0 + 301)  # the first due time after the schedule appeared
    assert fired(app, "sweep") == [T0 + 300]


def test_cron01_first_run_fires_a_due_time_within_the_grace(app):
    every_five_minutes(app)
    scheduler(app).tick(T0 + FIRST_RUN_GRACE - 1)
    assert fired(app, "sweep") == [T0]


def test_cron01_first_run_seen_by_one_scheduler_fires_after_a_long_tick_gap(app):
    every_five_minutes(app)
    sched = scheduler(app)
    sched.tick(T0 + 200)
    assert 300 + FIRST_RUN_GRACE < 599
    sched.tick(T0 + 599)  # past the grace, but it saw the schedule before T0 + 300
    assert fired(app, "sweep") == [T0 + 300]


def test_cron01_time_zone_and_dst_follow_croniters_rules(app):
    @app.cron("30 2 * * *", tz="Europe/Berlin")
    def nightly(run):
        return None

    sched = scheduler(app)
    day = datetime(2024, 3, 30, 2, 30, tzinfo=BERLIN).timestamp()
    sched.tick(day)
    # 2024-03-31: 02:30 does not exist in Berlin; croniter moves it to 03:00 CEST.
    spring = datetime(2024, 3, 31, 3, 0, tzinfo=BERLIN).timestamp()
    sched.tick(spring - 1)
    sched.tick(spring)
    sched.tick(spring + 3600)
    after = datetime(2024, 4, 1, 2, 30, tzinfo=BERLIN).timestamp()
    sched.tick(after + 1)
    assert fired(app, "nightly") == [day, spring, after]
    assert after - spring == 23.5 * 3600
    assert datetime.fromtimestamp(after, BERLIN).utcoffset().total_seconds() == 7200


def test_cron01_a_zone_east_of_utc_fires_at_its_local_time(app):
    @app.cron("0 9 * * 1-5", tz="America/New_York")
    def standup(run):
        return None

    monday = datetime(2024, 7, 1, 13, 0, tzinfo=UTC).timestamp()  # 09:00 EDT
    sched = scheduler(app)
    sched.tick(monday)
    assert fired(app, "standup") == [monday]
    winter_monday = datetime(2024, 12, 2, 14, 0, tzinfo=UTC).timestamp()  # 09:00 EST
    assert sched.tick(winter_monday - 60) == pytest.approx(60)
    sched.tick(winter_monday)
    assert fired(app, "standup")[-1] == winter_monday


def test_cron01_six_fields_fire_each_second_due_time_once(app, clock):
    @app.cron("* * * * * */10")  # seconds are the sixth field
    def often(run):
        app.dues.append(run.due.timestamp())

    base = 1_700_000_000.0  # a multiple of ten
    first, second = scheduler(app), scheduler(app)
    now = base - 0.5
    while now < base + 35:
        first.tick(now)
        second.tick(now)
        now += 0.7
    # The first tick fires base - 10 (within the first-run grace), then each due time once.
    expected = [base - 10, base, base + 10, base + 20, base + 30]
    assert fired(app, "often") == expected
    clock.set(base + 40)
    assert app.drain() == 5
    assert app.dues == expected


def test_cron01_tick_returns_seconds_until_the_next_due_time(app):
    every_five_minutes(app)

    @app.cron("* * * * * *")
    def each_second(run):
        return None

    assert scheduler(app).tick(T0 + 0.25) == pytest.approx(0.75)
    app.crons.pop("each_second")
    assert scheduler(app).tick(T0 + 10) == pytest.approx(290)


def test_cron01_invalid_expressions_and_zones_are_refused_at_registration(app):
    for expr in ("*/5 * * *", "61 * * * *", "* * * * * * *", "every minute"):
        with pytest.raises(ConfigError, match=expr.replace("*", r"\*")):
            app.cron(expr, name="bad")(lambda run: None)
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        app.cron("* * * * *", tz="Mars/Olympus", name="bad")(lambda run: None)
    with pytest.raises(ConfigError, match="catch_up"):
        app.cron("* * * * *", catch_up="soon", name="bad")(lambda run: None)
    assert "bad" not in app.tasks and app.crons == {}
    every_five_minutes(app)
    with pytest.raises(DuplicateTask):
        every_five_minutes(app)


def test_cron01_a_store_error_is_logged_and_tick_goes_on(app, monkeypatch):
    every_five_minutes(app)
    log = Log()
    sched = CronScheduler(app, log)

    def down(*args, **kwargs):
        raise OSError("store down")

    monkeypatch.setattr(app.store, "cron_last", down, raising=False)
    assert sched.tick(T0) <= 1.0
    assert log.events[-1][0] == "cron.error" and "store down" in log.events[-1][1]["error"]
    monkeypatch.undo()
    sched.tick(T0 + 1)
    assert fired(app, "sweep") == [T0]


def test_cron01_a_worker_runs_the_scheduler_and_its_jobs(store):
    app = tinyjobs.App(store)
    ran: list[float] = []

    @app.cron("* * * * * *")
    def each_second(run):
        ran.append(run.due.timestamp())

    with worker_thread(app, slots=2) as worker:
        assert worker.cron is not None
        wait_until(lambda: len(ran) >= 2, timeout=15, what="two cron runs")
    assert len(ran) == len(set(ran))
    assert all(due == int(due) for due in ran)
    without = tinyjobs.App(store)
    with worker_thread(without, slots=1) as worker:
        assert worker.cron is None


def test_cron_command_lists_each_schedule_with_its_last_and_next_due_time(tmp_path, monkeypatch):
    (tmp_path / "cronapp_cli.py").write_text(
        "import tinyjobs\n"
        f"app = tinyjobs.App('sqlite:///{tmp_path}/jobs.db')\n"
        "@app.cron('*/5 * * * *')\n"
        "def sweep(run): pass\n"
        "@app.cron('30 2 * * *', tz='Europe/Berlin', queue='nightly')\n"
        "def nightly(run): pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TINYJOBS_URL", raising=False)
    from click.testing import CliRunner

    from tinyjobs.cli import main

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cronapp_cli", raising=False)
    import cronapp_cli

    cronapp_cli.app.store.fire_cron("sweep", T0, NewJob("cron:sweep:1", "sweep"), now=T0)
    result = CliRunner().invoke(main, ["cron", "--app", "cronapp_cli:app", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert rows["sweep"]["last"] == datetime.fromtimestamp(T0, UTC).isoformat()
    assert rows["sweep"]["expression"] == "*/5 * * * *" and rows["sweep"]["tz"] == "UTC"
    assert rows["nightly"]["last"] is None and rows["nightly"]["next"].endswith(("+01:00", "+02:00"))
    table = CliRunner().invoke(main, ["cron", "--app", "cronapp_cli:app"])
    assert table.exit_code == 0
    assert "sweep" in table.output and "never" in table.output and "Europe/Berlin" in table.output
